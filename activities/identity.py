"""Who sent an operator's message, as Temporal recorded it.

The SDK does not tell workflow code the identity of an update's or a signal's sender,
but the workflow's history holds it: an update's in its accepted event
(``accepted_request.meta.identity``), a signal's in its signaled event. The thread runs
:func:`caller_identity` after an ``operator_resume`` to put it in the audit trail beside
the name the operator typed (``workflows/thread.py``).
"""

from __future__ import annotations

from temporalio import activity
from temporalio.api.history.v1 import HistoryEvent

from workflows.models import CallerLookup


@activity.defn
async def caller_identity(lookup: CallerLookup) -> str | None:
    """The identity the update or signal ``lookup`` names was sent with, cut to
    ``lookup.max_chars``; ``None`` when Temporal recorded none (or the message is not in
    the run's history)."""
    handle = activity.client().get_workflow_handle(lookup.workflow_id, run_id=lookup.run_id)
    signals = 0
    # Forward: a signal is found by its place among the run's signals of its name. A run
    # serves one AG-UI run by default (continue-as-new), so its history is short.
    async for event in handle.fetch_history_events():
        identity = _sender(event, lookup, signals)
        if identity is not None:
            return _cut(identity, lookup.max_chars) or None
        if _is_signal(event, lookup):
            signals += 1
    return None


def _sender(event: HistoryEvent, lookup: CallerLookup, signals_before: int) -> str | None:
    """The sender's identity if ``event`` is the message ``lookup`` names."""
    if lookup.update_id is not None and event.HasField(
        "workflow_execution_update_accepted_event_attributes"
    ):
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        if request.meta.update_id == lookup.update_id:
            return request.meta.identity
    if _is_signal(event, lookup) and signals_before == lookup.signal_index:
        return event.workflow_execution_signaled_event_attributes.identity
    return None


def _is_signal(event: HistoryEvent, lookup: CallerLookup) -> bool:
    return (
        lookup.signal_name is not None
        and event.HasField("workflow_execution_signaled_event_attributes")
        and event.workflow_execution_signaled_event_attributes.signal_name == lookup.signal_name
    )


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"
