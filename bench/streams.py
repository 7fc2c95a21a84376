"""Our SSE bridge against ``temporalio.contrib.workflow_streams``, on the same turn.

Every variant runs ten events per run around one activity on a workflow that already
exists, and is timed from sending the run to receiving its first and its terminal event:

- ``update+query``: the bench's minimal copy of ``gateway/streaming.py`` as it was
  before its reads were paced (the run's update returns its events; an offset query
  every ``stream_poll_seconds`` while in flight) on
  :class:`~bench.workflows.UpdateRunWorkflow`.
- ``ThreadWorkflow``: the engine's own code (``gateway.streaming.start_run``) without
  HTTP, so the gap to ``update+query`` is the engine's extra work per run.
- ``workflow_streams``: the run is the same accepted update, but its events reach the
  client through ``WorkflowStreamClient.subscribe`` long-poll updates, with the library's
  default 100 ms cooldown between polls and with none.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol, cast

from ag_ui.core import MessagesSnapshotEvent, RunAgentInput, RunFinishedEvent, StateSnapshotEvent
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateStage
from temporalio.contrib.workflow_streams import WorkflowStreamClient, WorkflowStreamItem

from bench.conversation import Conversation
from bench.history import HistoryGrowth, history_size, served_runs, tracked_runs
from bench.reads import ReadCount, StreamCost
from bench.stack import PRINCIPAL
from bench.stats import RunTiming, Summary
from bench.workflows import (
    EVENTS_PER_RUN,
    TOPIC,
    Event,
    EventsAfter,
    StreamRunWorkflow,
    UpdateRunWorkflow,
)
from gateway.sent_messages import SentMessages
from gateway.streaming import start_run
from settings import Settings
from workflows.agents.demo import DEMO
from workflows.thread_ids import workflow_id_for

WARMUP_RUNS = 2
"""Untimed runs on each variant's workflow before its measured runs."""
DEFAULT_COOLDOWN = timedelta(milliseconds=100)
"""``subscribe``'s default ``poll_cooldown``, which its docs advise keeping above 0."""


class Variant(Protocol):
    """One way to run a turn and deliver its events, on one workflow."""

    @property
    def workflow_id(self) -> str:
        """The workflow the variant's runs go to."""
        ...

    async def open(self) -> None:
        """Create the workflow, if runs do not create it themselves."""
        ...

    async def run(self) -> RunTiming:
        """One run, timed from sending it to its terminal event arriving."""
        ...


@dataclass
class UpdateQuery:
    """The minimal copy of ``gateway/streaming.py``'s ``RunStream``."""

    client: Client
    task_queue: str
    poll_seconds: float
    workflow_id: str = field(default_factory=lambda: f"bench-update-{uuid.uuid4()}")
    runs: int = 0

    async def open(self) -> None:
        """Start the workflow."""
        await self.client.start_workflow(
            UpdateRunWorkflow.run, id=self.workflow_id, task_queue=self.task_queue
        )

    async def run(self) -> RunTiming:
        """Accept the run, query by offset while in flight, end on the update's result."""
        self.runs += 1
        run_id = f"r{self.runs}"
        handle: WorkflowHandle[UpdateRunWorkflow, None] = self.client.get_workflow_handle(
            self.workflow_id
        )
        start = time.perf_counter()
        update = await handle.start_update(
            UpdateRunWorkflow.run_agent, run_id, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        result = asyncio.ensure_future(update.result())
        seen = 0
        first: float | None = None
        try:
            while not (await asyncio.wait({result}, timeout=self.poll_seconds))[0]:
                page = await handle.query(UpdateRunWorkflow.events, EventsAfter(run_id, seen))
                if page and first is None:
                    first = time.perf_counter() - start
                seen += len(page)
            events = result.result()
        finally:
            result.cancel()
        last = time.perf_counter() - start
        _check(events)
        return RunTiming(last if first is None else first, last)


@dataclass
class Stream:
    """A subscriber of the run's workflow stream, reading from where the last run ended."""

    client: Client
    task_queue: str
    cooldown: timedelta
    workflow_id: str = field(default_factory=lambda: f"bench-stream-{uuid.uuid4()}")
    runs: int = 0
    offset: int = 0
    """Where the next run's events start in the stream: the client tracks it, the
    cheapest way (a stateless gateway would query the offset first)."""

    async def open(self) -> None:
        """Start the workflow."""
        await self.client.start_workflow(
            StreamRunWorkflow.run, id=self.workflow_id, task_queue=self.task_queue
        )

    async def run(self) -> RunTiming:
        """Accept the run, then subscribe until its ``RUN_FINISHED`` arrives."""
        self.runs += 1
        handle: WorkflowHandle[StreamRunWorkflow, None] = self.client.get_workflow_handle(
            self.workflow_id
        )
        stream = WorkflowStreamClient.create(self.client, self.workflow_id)
        start = time.perf_counter()
        await handle.start_update(
            StreamRunWorkflow.run_agent,
            f"r{self.runs}",
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
        # The subscription never ends on its own while the workflow runs: close it at
        # the terminal event, between polls, so no poll is left waiting in the workflow.
        subscription = cast(
            AsyncGenerator[WorkflowStreamItem[Event], None],
            stream.subscribe(
                TOPIC, from_offset=self.offset, result_type=dict, poll_cooldown=self.cooldown
            ),
        )
        events: list[Event] = []
        first: float | None = None
        try:
            async for item in subscription:
                first = time.perf_counter() - start if first is None else first
                events.append(item.data)
                if item.data["type"] == "RUN_FINISHED":
                    self.offset = item.offset + 1
                    break
        finally:
            await subscription.aclose()
        last = time.perf_counter() - start
        _check(events)
        return RunTiming(last if first is None else first, last)


@dataclass
class Thread:
    """The engine's ``ThreadWorkflow`` through ``gateway.streaming``, as the gateway
    drives it, minus HTTP."""

    client: Client
    settings: Settings
    conversation: Conversation = field(default_factory=Conversation)

    @property
    def workflow_id(self) -> str:
        """The thread's workflow."""
        return workflow_id_for(self.conversation.thread_id)

    async def open(self) -> None:
        """Nothing to do: a thread's workflow starts with its first run."""

    async def run(self) -> RunTiming:
        """Start the run with update-with-start and stream it as the gateway does."""
        run_input = RunAgentInput.model_validate(self.conversation.next_input())
        start = time.perf_counter()
        sent = SentMessages(run_input.messages)
        stream = await start_run(self.client, self.settings, DEMO, run_input, PRINCIPAL, sent)
        first: float | None = None
        last: float | None = None
        async for page in stream.pages():
            if not page:
                continue  # a keepalive
            now = time.perf_counter() - start
            first = now if first is None else first
            for item in page:
                event = item.event
                if isinstance(event, MessagesSnapshotEvent | StateSnapshotEvent):
                    self.conversation.adopt(
                        event.model_dump(mode="json", by_alias=True, exclude_none=True)
                    )
                elif isinstance(event, RunFinishedEvent):
                    last = now
        if first is None or last is None:
            raise RuntimeError(f"thread run {run_input.run_id} ended without RUN_FINISHED")
        return RunTiming(first, last)


def _check(events: list[Event]) -> None:
    """A variant that lost or reordered events would be timing something else."""
    types = [event["type"] for event in events]
    if len(types) != EVENTS_PER_RUN or types[0] != "RUN_STARTED" or types[-1] != "RUN_FINISHED":
        raise RuntimeError(f"unexpected events: {types}")


@dataclass(frozen=True)
class VariantResult:
    """One variant's latencies, history cost and reads while its runs streamed."""

    name: str
    first: Summary
    last: Summary
    history: HistoryGrowth
    cost: StreamCost


async def measure_variant(
    client: Client, reads: ReadCount, name: str, variant: Variant, runs: int
) -> VariantResult:
    """``runs`` timed runs on a workflow that has already done ``WARMUP_RUNS``.

    The warm-up runs create the workflow and warm the worker's cache and code paths, so
    the history counted is what a run adds to an existing thread. ``client`` reads the
    history, outside ``reads``, which counts the variant's own reads.
    """
    await variant.open()
    for _ in range(WARMUP_RUNS):
        await variant.run()
    before = reads.reads
    if isinstance(variant, Thread):
        # A thread continues as new after every run: each run is counted in the
        # workflow run that served it.
        timings = [await variant.run() for _ in range(runs)]
        served = await served_runs(client, variant.workflow_id)
        growth = HistoryGrowth(served.per_run[-runs:])
    else:
        baseline = await history_size(client, variant.workflow_id)
        timings, growth = await tracked_runs(
            client, variant.workflow_id, variant.run, runs, baseline
        )
    # Runs are sequential: their latencies add up to the time spent running them.
    spent = sum(timing.last for timing in timings)
    return VariantResult(
        name,
        Summary(tuple(timing.first for timing in timings), spent),
        Summary(tuple(timing.last for timing in timings), spent),
        growth,
        StreamCost(reads.reads - before, spent),
    )


async def measure_streams(
    client: Client,
    gateway_client: Client,
    reads: ReadCount,
    settings: Settings,
    task_queue: str,
    runs: int,
) -> list[VariantResult]:
    """Every variant, one after another, ``runs`` runs each, on ``gateway_client``,
    whose reads ``reads`` counts; ``client`` reads the histories."""
    poll = settings.stream_poll_seconds
    variants: list[tuple[str, Variant]] = [
        ("update+query (minimal)", UpdateQuery(gateway_client, task_queue, poll)),
        ("ThreadWorkflow, no HTTP", Thread(gateway_client, settings)),
        ("workflow_streams, 100ms", Stream(gateway_client, task_queue, DEFAULT_COOLDOWN)),
        ("workflow_streams, 0ms", Stream(gateway_client, task_queue, timedelta(0))),
    ]
    return [await measure_variant(client, reads, name, variant, runs) for name, variant in variants]
