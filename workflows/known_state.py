"""Runs that carry their state only when their thread lacks it.

AG-UI clients send back the ``state`` of the last ``STATE_SNAPSHOT`` they got, and each
run's reply holds at least one ``STATE_SNAPSHOT`` of the whole state; an agent whose
state grows (the demo's outbox keeps every mail sent) would record it in every run's
update twice, so each run would cost more than the one before. So, as with the
messages (``workflows.known_messages``), the gateway sends a thread a run whose state
is the digest of the client's (``RunRequest.known_state``) instead of the state. The
thread takes such a run only if its own state has that digest; otherwise it rejects the
update before recording anything (``known_messages.RESEND``) and the gateway sends the
run whole. Then the client's state is the thread's: merging it would change nothing,
so the run goes on with the thread's. Its reply carries each ``STATE_SNAPSHOT`` as the
JSON Patch from the one before, the first from that state (``RunReply.state_patches``),
and the gateway makes them whole again from the client's state.

Such a run goes to the update :data:`RUN_ON_KNOWN_STATE`, not ``run_agent``: a thread on
a build older than this module has no handler by that name and rejects it, so the
gateway sends it the run whole, where under ``run_agent`` the older build would have
ignored the digest and dropped whatever the client had changed in its state.

The digest is over the state's JSON with sorted keys, so the order a client keeps keys
in (JavaScript puts integer-like ones first) does not matter; where the two sides would
still write the JSON differently, the run is only sent again whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import jsonpatch
    import pydantic_core
    from ag_ui.core import StateSnapshotEvent

    from workflows import budgets
    from workflows.event_log import state_patch
    from workflows.models import SequencedEvent

RUN_ON_KNOWN_STATE = "run_agent_on_known_state"
"""The name of the thread's update for a run sent with :func:`digest` of its state
(``ThreadWorkflow.run_agent_on_known_state``), which names a build that lacks it in its
rejection."""

Patch = list[dict[str, Any]]


def digest(state: Any) -> str | None:
    """The digest a run sends instead of ``state``; ``None`` for a state not worth
    leaving out, which is not a non-empty JSON object (the thread checks such a state
    itself: its rejection of one names what is wrong)."""
    if not isinstance(state, dict) or not state:
        return None
    canonical = json.dumps(state, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def leave_out(
    events: Sequence[SequencedEvent], base: bytes, logged: Sequence[Patch] | None = None
) -> tuple[list[SequencedEvent], list[Patch]]:
    """``events`` with each ``STATE_SNAPSHOT``'s snapshot left out (``None``), and the
    patches that make them again, in order, from the state ``base`` (as
    ``budgets.to_json``).

    Args:
        logged: Those patches as the thread's log keeps them
            (``EventLog.state_patches``), where its snapshot before the first of
            ``events`` is ``base``: a changed state's patch costs the most of a run's
            state, and the log has just made it.
    """
    snapshots = [item.event for item in events if isinstance(item.event, StateSnapshotEvent)]
    if logged is None or len(logged) != len(snapshots):
        logged = _patches(snapshots, base)
    kept = [
        item.model_copy(update={"event": item.event.model_copy(update={"snapshot": None})})
        if isinstance(item.event, StateSnapshotEvent)
        else item
        for item in events
    ]
    return kept, list(logged)


def _patches(snapshots: Sequence[StateSnapshotEvent], base: bytes) -> list[Patch]:
    """The patches that make ``snapshots``, in order, from the state ``base``."""
    patches = []
    previous = base
    for event in snapshots:
        encoded = budgets.to_json(event.snapshot)
        patches.append(state_patch(previous, encoded, event.snapshot))
        previous = encoded
    return patches


def fill_in(
    events: Sequence[SequencedEvent], state: dict[str, Any], patches: Sequence[Patch]
) -> list[SequencedEvent]:
    """``events`` of a reply made by :func:`leave_out` with their snapshots whole again,
    from the client's ``state`` (left as it is). The events are only sent on, so a
    snapshot is a copy of its own only where a later patch would change it: snapshots of
    one state, an empty patch apart, share one object, and a reply that changed nothing
    shares the client's."""
    changed = [index for index, patch in enumerate(patches) if patch]
    last = changed[-1] if changed else -1
    current = _copy(state) if changed else state
    snapshot: Any = None
    whole: list[SequencedEvent] = []
    index = -1
    for item in events:
        event = item.event
        if isinstance(event, StateSnapshotEvent):
            index += 1
            if patches[index] or snapshot is None:
                current = jsonpatch.apply_patch(current, patches[index], in_place=True)
                # A later patch changes ``current`` in place.
                snapshot = current if index >= last else _copy(current)
            event = event.model_copy(update={"snapshot": snapshot})
            item = item.model_copy(update={"event": event})
        whole.append(item)
    return whole


def _copy(state: Any) -> Any:
    """A deep copy of the JSON value ``state``, written and read back at C speed."""
    return pydantic_core.from_json(pydantic_core.to_json(state))
