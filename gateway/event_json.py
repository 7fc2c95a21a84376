"""An event's SSE ``data:`` line written around the JSON of its largest field, which the
caller writes itself.

``ag_ui``'s models serialise through a serializer of their own (it leaves out fields
without a value), which first copies every field's value into Python objects; for the
snapshots of a long thread, a conversation or a grown state, that was the costliest
part of what the gateway wrote. So a snapshot event is written with that field empty,
and the caller's JSON of the field goes into its slot: :func:`encode_state_snapshot`
for a ``STATE_SNAPSHOT``, ``gateway.sent_messages`` for a ``MESSAGES_SNAPSHOT``.
"""

from __future__ import annotations

import pydantic_core
from ag_ui.core import BaseEvent, StateSnapshotEvent
from ag_ui.encoder import EventEncoder


def opening(event: BaseEvent, field: str, empty: list[object] | dict[str, object]) -> str | None:
    """``event``'s ``data:`` line as ``EventEncoder`` writes it, up to the value of
    ``field`` (its last field, named alike by alias): the caller appends that value's
    JSON and ``}\\n\\n``. ``None`` when ``field`` is not the event's last (an event with
    extra fields), which leaves the caller to ``EventEncoder``.
    """
    empty_json = "[]" if isinstance(empty, list) else "{}"
    head = event.model_copy(update={field: empty}).model_dump_json(by_alias=True)
    if not head.endswith(f'"{field}":{empty_json}}}'):
        return None
    return "data: " + head.removesuffix(empty_json + "}")


def encode_state_snapshot(event: StateSnapshotEvent) -> str:
    """``event`` as ``EventEncoder`` writes it (the SSE ``data:`` line), its state written
    by ``pydantic_core`` directly: a state that grows with its thread (the demo's outbox)
    made it the costliest event a late turn wrote."""
    head = opening(event, "snapshot", {})
    if head is None:
        return EventEncoder().encode(event)
    return f"{head}{pydantic_core.to_json(event.snapshot).decode()}}}\n\n"
