"""The bridge from a thread workflow's run to a stream of AG-UI events.

A run is one workflow update. While the update is in flight the gateway reads the
run's new events with the ``events`` query, by offset; when the update completes its
result carries every event of the run, so the terminal event reaches the client as soon
as the run ends, never a poll interval later. Short runs therefore cost one update and
no queries at all. ``bench/`` measures this against alternatives; this module is the one
place the choice lives.

Every event comes with its ``seq``, its position in the thread's event log, which the
gateway sends as the SSE ``id``: a client that lost its stream reads the rest of the
run from there with :func:`attach`. A client that follows the whole thread, whoever
starts its runs, reads the log with the ``log`` query (:func:`follow`).

A thread's first run is checked here before it starts the thread's workflow, by the
rules the workflow checks every run with (``workflows/admission.py``): update-with-start
creates the workflow even when its validator then rejects the run, and a rejected run
must create nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ag_ui.core import RunAgentInput
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.common import (
    QueryRejectCondition,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from settings import Settings
from workflows import search_attributes, visibility
from workflows.admission import check_run
from workflows.models import (
    EventsQuery,
    LogPage,
    LogQuery,
    RunLookup,
    RunRecord,
    RunReply,
    RunRequest,
    SequencedEvent,
    ThreadStart,
    ThreadState,
)
from workflows.sdk.agent import AgentDefinition
from workflows.thread import ThreadWorkflow
from workflows.thread_ids import workflow_id_for

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
"""A stream following a thread sends a keepalive after this long without an event, so
proxies on the way do not close it as idle."""
TRANSIENT = frozenset(
    {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.RESOURCE_EXHAUSTED}
)
"""Failures of a read that a stream following a thread waits out: Temporal (or a
worker) unreachable or overloaded for a while."""
FOLLOW_QUERY_TIMEOUT = timedelta(seconds=10)
"""How long one read of a followed thread may take (no worker, say) before it counts as
such a failure, so the stream's keepalives go on meanwhile."""


def run_key_for(run_input: RunAgentInput, principal: str) -> str:
    """The update id for a run: the same request sent twice by the same principal is
    the same update.

    Temporal answers a repeated update id with the first update's outcome, so a client
    retrying a run gets its events instead of a second execution. The digest tells apart
    different requests that reuse a ``runId``, and different senders of one request.
    """
    sent = [principal, run_input.model_dump(mode="json", by_alias=True)]
    canonical = json.dumps(sent, sort_keys=True)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    return f"{run_input.run_id}:{digest}"


class RunStream(Protocol):
    """A run handed to its thread, whose events can be streamed once."""

    def pages(self) -> AsyncIterator[list[SequencedEvent]]:
        """The run's events in order, ending with its terminal event, in pages: the
        events that arrived together, which the gateway writes to the client at once.

        Raises:
            WorkflowUpdateFailedError: The thread rejected the run; its cause carries
                the stable code.
        """
        ...


class AcceptedRun:
    """A run accepted by its thread workflow."""

    def __init__(
        self,
        thread: WorkflowHandle[ThreadWorkflow, None],
        update: WorkflowUpdateHandle[RunReply],
        poll_seconds: float,
    ) -> None:
        self._thread = thread
        self._update = update
        self._poll_seconds = poll_seconds

    async def pages(self) -> AsyncIterator[list[SequencedEvent]]:
        """See :meth:`RunStream.pages`."""
        result = asyncio.ensure_future(self._update.result())
        after = 0
        try:
            while True:
                done, _ = await asyncio.wait({result}, timeout=self._poll_seconds)
                if done:
                    break
                page = await self._thread.query(
                    ThreadWorkflow.events, EventsQuery(run_key=self._update.id, after=after)
                )
                if page.events:
                    after = page.events[-1].seq
                    yield page.events
            rest = [item for item in result.result().events if item.seq > after]
            if rest:
                yield rest
        finally:
            result.cancel()


class RejectedRun:
    """A thread's first run, rejected before it started the thread's workflow."""

    def __init__(self, rejection: ApplicationError) -> None:
        self._rejection = rejection

    async def pages(self) -> AsyncIterator[list[SequencedEvent]]:
        """No events: the rejection, as Temporal reports a workflow's."""
        raise WorkflowUpdateFailedError(self._rejection)
        yield []  # Unreachable; makes this an async generator, as the protocol has it.


def thread_handle(client: Client, thread_id: str) -> WorkflowHandle[ThreadWorkflow, None]:
    """The handle of the workflow that holds thread ``thread_id``."""
    return client.get_workflow_handle(workflow_id_for(thread_id))


async def find_run(thread: WorkflowHandle[ThreadWorkflow, None], run_id: str) -> RunLookup:
    """The thread's owner and its latest run with AG-UI ``runId`` ``run_id`` (a resume
    may reuse one)."""
    return await thread.query(ThreadWorkflow.run_record, run_id)


async def attach(
    thread: WorkflowHandle[ThreadWorkflow, None], run: RunRecord, after: int, poll_seconds: float
) -> AsyncIterator[list[SequencedEvent]]:
    """The run's events with ``seq > after``, then, while it is in flight, the live rest,
    in pages as :meth:`RunStream.pages`.

    Ends after the run's terminal event; a finished run is read back at once.
    """
    while True:
        page = await thread.query(ThreadWorkflow.events, EventsQuery(run_key=run.key, after=after))
        if page.events:
            after = page.events[-1].seq
            yield page.events
        if page.ended:
            return
        await asyncio.sleep(poll_seconds)


async def read_log(thread: WorkflowHandle[ThreadWorkflow, None], after: int) -> LogPage:
    """The thread's owner and the first page of its events with ``seq > after``."""
    return await thread.query(ThreadWorkflow.log, LogQuery(after=after))


async def follow(
    thread: WorkflowHandle[ThreadWorkflow, None],
    after: int,
    first: LogPage,
    poll_seconds: float,
    idle_seconds: float,
) -> AsyncIterator[list[SequencedEvent]]:
    """The thread's events with ``seq > after``, starting with ``first``
    (:func:`read_log`), then every event the thread logs, whichever run it belongs to
    (a client's, an expiry's, an operator's...), in pages as :meth:`RunStream.pages`;
    an empty page after ``KEEPALIVE_SECONDS`` without events.

    The thread is read every ``poll_seconds`` while a run is in progress, every
    ``idle_seconds`` while it is idle or waiting, at once while it has more; a Temporal
    that is unreachable for a while is waited out. It ends when the thread's workflow
    is gone (or closed, after its last events), or when its caller stops reading.
    """
    page: LogPage | None = first
    quiet_since = time.monotonic()
    while True:
        if page is not None and page.events:
            after = page.events[-1].seq
            quiet_since = time.monotonic()
            yield page.events
        elif time.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
            quiet_since = time.monotonic()
            yield []
        if page is None or not page.more:
            running = page is not None and page.running
            await asyncio.sleep(poll_seconds if running else idle_seconds)
        try:
            page = await thread.query(
                ThreadWorkflow.log,
                LogQuery(after=after),
                reject_condition=QueryRejectCondition.NOT_OPEN,
                rpc_timeout=FOLLOW_QUERY_TIMEOUT,
            )
        except WorkflowQueryRejectedError:
            async for events in _last_events(thread, after):
                yield events
            return
        except WorkflowQueryFailedError as err:
            # E.g. a worker of an older build, without the query, mid-deploy.
            log.warning("stopped following %s: %s", thread.id, err)
            return
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return
            if err.status not in TRANSIENT:
                # A failure a reconnect sorts out better.
                log.warning("stopped following %s: %s", thread.id, err.status.name)
                return
            page = None


async def _last_events(
    thread: WorkflowHandle[ThreadWorkflow, None], after: int
) -> AsyncIterator[list[SequencedEvent]]:
    """The events with ``seq > after`` of a thread whose workflow has closed
    (terminated, say), which a query that is not rejected still reads."""
    while True:
        page = await read_log(thread, after)
        if page.events:
            after = page.events[-1].seq
            yield page.events
        if not page.more:
            return


async def start_run(
    client: Client,
    settings: Settings,
    agent: AgentDefinition,
    run_input: RunAgentInput,
    principal: str,
) -> RunStream:
    """Hand a run to its thread's workflow, starting the workflow on the thread's first run.

    A thread that exists gets a plain update, which Temporal dispatches to the worker ~2
    ms sooner than update-with-start (``docs/bench.md``); when there is no such workflow
    (or it has ended), the run is checked against a new thread and, if the thread would
    take it, starts one with update-with-start. Returns once the workflow has received
    the run (or the run was rejected). A rejected run raises
    ``WorkflowUpdateFailedError`` (its cause carries the stable code) from
    :meth:`RunStream.pages`, as Temporal reports rejections with the outcome. A thread
    started by the run belongs to ``principal``; on anyone else's thread the run is
    rejected as if there were none.

    Raises:
        RPCError: Temporal could not be reached.
    """
    thread = thread_handle(client, run_input.thread_id)
    request = RunRequest(agent=agent.name, input=run_input, principal=principal)
    key = run_key_for(run_input, principal)
    try:
        update = await thread.start_update(
            ThreadWorkflow.run_agent,
            request,
            id=key,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        new_thread = ThreadState(thread_id=run_input.thread_id, agent=agent.name, owner=principal)
        try:
            check_run(new_thread, request, agent, datetime.now(UTC))
        except ApplicationError as rejection:
            return RejectedRun(rejection)
        update = await client.start_update_with_start_workflow(
            ThreadWorkflow.run_agent,
            request,
            id=key,
            start_workflow_operation=_start_thread(
                settings, agent.name, run_input.thread_id, principal
            ),
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
    return AcceptedRun(thread, update, settings.stream_poll_seconds)


def _start_thread(
    settings: Settings, agent: str, thread_id: str, owner: str
) -> WithStartWorkflowOperation[ThreadWorkflow, None]:
    """How a run starts its thread's workflow when there is none."""
    return WithStartWorkflowOperation(
        ThreadWorkflow.run,
        ThreadStart(
            thread_id=thread_id,
            agent=agent,
            owner=owner,
            continue_as_new_after_runs=settings.continue_as_new_after_runs,
        ),
        id=workflow_id_for(thread_id),
        task_queue=settings.task_queue,
        # Concurrent first runs of one thread must share one workflow, not race to make two.
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(search_attributes.AGENT, agent),
                SearchAttributePair(search_attributes.OWNER, visibility.owner_key(owner)),
                SearchAttributePair(search_attributes.THREAD_STATUS, "idle"),
            ]
        ),
    )
