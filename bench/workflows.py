"""The bench's own workflows: the update floors, the interrupt cycle's floor and two
minimal ways to stream a run.

They live in a module that imports nothing but Temporal and the standard library, so the
workflow sandbox, which re-imports a workflow's module, accepts it as it is.

``UpdateRunWorkflow`` and ``StreamRunWorkflow`` run the same turn (an event, one
activity standing in for the model, nine more events) and differ only in how a client
gets the events: the first as ``gateway/streaming.py`` does (the run is an update whose
result carries its events, read by offset with a query while in flight), the second
through ``temporalio.contrib.workflow_streams``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.contrib.workflow_streams import WorkflowStream

Event = dict[str, str]
"""An AG-UI-shaped event: small JSON objects with a ``type``, as the engine emits."""

REPLY_CHUNKS = 6
"""Text deltas per reply: with RUN_STARTED, TEXT_MESSAGE_START/END and RUN_FINISHED,
ten events per run, as many as a short run of the demo agent."""
EVENTS_PER_RUN = REPLY_CHUNKS + 4
TOPIC = "events"


@workflow.defn
class FloorWorkflow:
    """The cheapest possible update: what one Temporal update round trip costs."""

    @workflow.run
    async def run(self) -> None:
        """Stay open; the bench only sends updates."""
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def ping(self, value: int) -> int:
        """Return at once, so the round trip is Temporal's alone."""
        return value

    @workflow.update
    async def ping_tool(self, value: int) -> int:
        """Run one no-op local activity, then return: the least Temporal work of a resume
        that runs a tool, as the demo's approval does."""
        return await workflow.execute_local_activity(
            noop_tool, value, start_to_close_timeout=timedelta(seconds=30)
        )


@workflow.defn
class FloorCycleWorkflow:
    """An interrupt cycle with Temporal's share alone: a first run that pauses at once,
    then a resume that runs one activity, as the demo's approval runs ``send_email``.
    The workflow stays open after it, as a thread waits for its next run."""

    @workflow.run
    async def run(self) -> None:
        """Stay open; both runs arrive as updates, the first with the start."""
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def pause(self, value: int) -> int:
        """The first run: it ends at once, as one that pauses on an approval does."""
        return value

    @workflow.update
    async def resume(self, value: int) -> int:
        """The resume: one no-op activity on the task queue, then the result."""
        return await workflow.execute_activity(
            noop_tool, value, start_to_close_timeout=timedelta(seconds=30)
        )


@activity.defn
async def noop_tool(value: int) -> int:
    """A tool that does nothing, so ``ping_tool`` costs Temporal's work alone."""
    return value


@activity.defn
async def reply_chunks(run_id: str) -> list[str]:
    """Stand in for the model call, so a run spans two workflow tasks like a real one."""
    return [f"chunk {i} of {run_id} " for i in range(REPLY_CHUNKS)]


async def take_turn(run_id: str, emit: Callable[[Event], None]) -> None:
    """One run: ``RUN_STARTED``, the activity, the reply, ``RUN_FINISHED``."""
    emit({"type": "RUN_STARTED", "runId": run_id})
    chunks = await workflow.execute_activity(
        reply_chunks, run_id, start_to_close_timeout=timedelta(seconds=30)
    )
    emit({"type": "TEXT_MESSAGE_START", "messageId": run_id, "role": "assistant"})
    for chunk in chunks:
        emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": run_id, "delta": chunk})
    emit({"type": "TEXT_MESSAGE_END", "messageId": run_id})
    emit({"type": "RUN_FINISHED", "runId": run_id})


@dataclass
class EventsAfter:
    """The ``events`` query's argument: a run's events after an offset into that run."""

    run_id: str
    after: int


@workflow.defn
class UpdateRunWorkflow:
    """Our approach, minimal: the run is an update returning its events; a query reads
    the events of a run in flight by offset."""

    def __init__(self) -> None:
        self._runs: dict[str, list[Event]] = {}

    @workflow.run
    async def run(self) -> None:
        """Stay open; all work arrives as updates."""
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def run_agent(self, run_id: str) -> list[Event]:
        """Execute one run and return all its events, terminal event last."""
        events = self._runs.setdefault(run_id, [])
        await take_turn(run_id, events.append)
        return events

    @workflow.query
    def events(self, query: EventsAfter) -> list[Event]:
        """The run's events after ``query.after``."""
        return self._runs.get(query.run_id, [])[query.after :]


@workflow.defn
class StreamRunWorkflow:
    """The alternative: the run's events go to a workflow stream subscribers long-poll.

    The run itself is still an update, accepted like ours, so the two workflows differ
    only in how events reach the client; the client never waits for its result.
    """

    @workflow.init
    def __init__(self) -> None:
        # WorkflowStream registers its handlers and must be built here, in __init__.
        self._stream = WorkflowStream()
        self._topic = self._stream.topic(TOPIC)

    @workflow.run
    async def run(self) -> None:
        """Stay open; all work arrives as updates."""
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def run_agent(self, run_id: str) -> None:
        """Execute one run, publishing its events to the stream."""
        await take_turn(run_id, self._topic.publish)


BENCH_WORKFLOWS: list[type] = [
    FloorWorkflow,
    FloorCycleWorkflow,
    UpdateRunWorkflow,
    StreamRunWorkflow,
]
BENCH_ACTIVITIES: list[Callable[..., Any]] = [noop_tool, reply_chunks]
