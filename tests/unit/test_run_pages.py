"""What a run's stream sends around a failure: AG-UI requires a run to open with
``RUN_STARTED``, so a run that fails before any of its events (after keepalives only,
say: a run waiting on its first read) still opens with one before its ``RUN_ERROR``."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ag_ui.core import EventType, RunAgentInput
from temporalio.service import RPCError, RPCStatusCode

from gateway.runs import _guarded
from workflows.models import SequencedEvent

RUN_INPUT = RunAgentInput.model_validate(
    {
        "threadId": "t1",
        "runId": "r1",
        "messages": [],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
)


class KeepalivesThenFailure:
    """A run's stream that sends keepalives, then fails as a read the gateway does not
    wait out."""

    async def pages(self) -> AsyncIterator[list[SequencedEvent]]:
        yield []
        yield []
        raise RPCError("denied", RPCStatusCode.PERMISSION_DENIED, b"")


async def test_a_run_that_fails_after_keepalives_only_opens_with_run_started() -> None:
    pages = [page async for page in _guarded(RUN_INPUT, KeepalivesThenFailure())]
    assert pages[:2] == [[], []]
    assert [event.type for _, event in pages[2]] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    assert len(pages) == 3
