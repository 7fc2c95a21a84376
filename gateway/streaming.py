"""The bridge from a thread workflow's run to a stream of AG-UI events.

A run is one workflow update. While the update is in flight the gateway reads the
run's new events with the ``events`` query, by offset; when the update completes its
result carries every event of the run, so the terminal event reaches the client as soon
as the run ends, never a poll interval later. Short runs therefore cost one update and
no queries at all. ``bench/`` measures this against alternatives; this module is the one
place the choice lives.

A query is a round trip through the server to the worker, so a stream reads only when
there may be something to read (:class:`_Pace`): every poll interval while events flow,
and once they stop, not until the workflow has completed a workflow task, which the
server's long poll of the workflow's history reports without involving the worker.

Every event comes with its ``seq``, its position in the thread's event log, which the
gateway sends as the SSE ``id``: a client that lost its stream reads the rest of the
run from there with :func:`attach`. A client that follows the whole thread, whoever
starts its runs, reads the log with the ``log`` query (:func:`follow`).

A thread's first run is checked here before it starts the thread's workflow, by the
rules the workflow checks every run with (``workflows/admission.py``): update-with-start
creates the workflow even when its validator then rejects the run, and a rejected run
must create nothing. A run whose input shows a first run goes to update-with-start at
once, without first trying a plain update that would only find no workflow.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from ag_ui.core import Message, MessagesSnapshotEvent, RunAgentInput
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
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

from gateway.errors import RETRY_AFTER_SECONDS, UNREACHABLE, NotAccepted, accepted
from gateway.least_recent import LeastRecent
from gateway.sent_messages import SentMessages
from settings import Settings
from workflows import known_messages, known_state, search_attributes, visibility
from workflows.admission import check_run
from workflows.budgets import KIB
from workflows.models import (
    EventsQuery,
    KnownMessages,
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
from workflows.runner import STALE_TIME
from workflows.sdk.agent import AgentDefinition
from workflows.thread import ThreadWorkflow
from workflows.thread_ids import workflow_id_for

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
"""A stream sends a keepalive after this long without an event (a model thinking, a tool
running, a thread waiting, a worker being replaced), so proxies on the way do not close
it as idle."""
TRANSIENT = UNREACHABLE | {RPCStatusCode.RESOURCE_EXHAUSTED}
"""Failures of a read that a stream waits out: Temporal (or a worker) unreachable, as a
request's answer would say (a read past :data:`READ_TIMEOUT` among them: the SDK fails
it ``CANCELLED``), or overloaded for a while."""
READ_TIMEOUT = timedelta(seconds=10)
"""How long one read of a thread may take before it counts as Temporal unreachable (a
request's answer is 503 ``TEMPORAL_UNAVAILABLE``; a stream waits it out, its
keepalives going on meanwhile). With no worker to answer it (one stopped or being
replaced, say), Temporal would hold a read for 30 s, longer than many clients and
proxies wait."""


WATCHES = 256
"""The most streams of one gateway process that long-poll a thread's history at once;
quiet streams past it poll instead. Each long poll is an HTTP/2 stream of the one
connection the gateway's Temporal client has, beside its calls (a run's update result is
a long poll too), and a proxy in front of Temporal may cap the streams of a connection:
quiet streams must not take them all."""


class _Slots:
    """A count of something a process holds a bounded number of at once."""

    def __init__(self, size: int) -> None:
        self.free = size

    def take(self) -> bool:
        """Take one, if one is free."""
        if self.free <= 0:
            return False
        self.free -= 1
        return True

    def give(self) -> None:
        """Give one back."""
        self.free += 1


_WATCHING = _Slots(WATCHES)

POSITION_BYTES = 4 * KIB * KIB
"""About how much memory the positions :class:`_Pace` keeps may hold: some ten thousand
threads' (:func:`_position_cost`)."""


def _position_cost(key: tuple[str, str], token: bytes) -> int:
    """About the memory one kept position holds: its key, its token and the entry."""
    return len(key[0]) + len(key[1]) + len(token) + 200


_POSITIONS: LeastRecent[tuple[str, str], bytes] = LeastRecent(POSITION_BYTES, _position_cost)
"""Where the history of each workflow (and run, for a pace pinned to one) was last left
by a pace of this process: the continuation token of its last long poll."""


class _Pace:
    """When a stream reads its thread's events next.

    While reads bring events (a model's tokens, say), every ``poll_seconds``: the
    client gets an event at most that long after the workflow logged it. Once a read
    brings none (the run waits on a model's first token, on a tool, on its turn), not
    until the workflow has completed a workflow task, its only way to log events, which
    a long poll of the workflow's history reports. That long poll waits in the server,
    not in the worker and not in the gateway's loop, so a run that waits costs no
    queries meanwhile, and its next event is read as soon as it is logged, without a
    poll interval.

    The first read after a quiet spell may find nothing: the history reports the tasks
    completed since the pace last looked, those before the last read included.

    A long poll without a position reads the history from the run's start, and under
    Worker Versioning a thread's run holds its whole conversation. So a pace goes on
    from where this process's paces last left the history (``_POSITIONS``): a long
    thread's history is read whole once per gateway process, not once for every stream
    that goes quiet.

    Args:
        history: The thread's workflow; pinned to a run, the pace watches that run
            alone; unpinned, the run current when it first looks, then each one after.
        poll_seconds: How often to read while events flow.
        first_seconds: How long the first wait lasts instead (a pace starts as if
            events flowed).
    """

    def __init__(
        self,
        history: WorkflowHandle[Any, Any],
        poll_seconds: float,
        first_seconds: float | None = None,
    ) -> None:
        self._history = history
        self._key = (history.id, history.run_id or "")
        self._poll_seconds = poll_seconds
        self._next_seconds = poll_seconds if first_seconds is None else first_seconds
        """How long the next wait lasts while events flow."""
        self._flowing = True
        self._token = _POSITIONS.get(self._key)
        """Where the history's long poll goes on from: where this process's paces (this
        one's own last long poll among them) last left it before the pace's last read;
        ``None``: from the run's start."""
        self._watching = True

    def read(self, flowing: bool) -> None:
        """Note whether the last read brought events."""
        self._flowing = flowing

    async def due(self, fallback_seconds: float) -> None:
        """Return when the next read is due.

        Args:
            fallback_seconds: How long to wait instead when the history cannot be
                watched: the server refused it (the pace then polls from here on) or
                could not be reached (:data:`TRANSIENT`; it watches again next time),
                or ``WATCHES`` streams of this process watch already.
        """
        await self._wait(fallback_seconds)
        # Taken before the read: a position another stream reached after it could be
        # past a workflow task whose events that read missed.
        self._token = _POSITIONS.get(self._key)

    async def _wait(self, fallback_seconds: float) -> None:
        if self._flowing:
            await asyncio.sleep(self._next_seconds)
            self._next_seconds = self._poll_seconds
            return
        if not self._watching or not _WATCHING.take():
            await asyncio.sleep(fallback_seconds)
            return
        try:
            while not await self._changed(fallback_seconds):
                pass
            return
        except RPCError as err:
            if not _transient(err):
                log.warning("polling %s instead of watching its history: %s", self._history.id, err)
                _POSITIONS.forget(self._key)
                self._watching = False
        finally:
            _WATCHING.give()
        await asyncio.sleep(fallback_seconds)

    async def _changed(self, fallback_seconds: float) -> bool:
        """One long poll of the history: whether it reports a completed workflow task,
        or the end of the workflow run (a continue-as-new: the next run's events)."""
        fresh = self._token is None
        events = self._history.fetch_history_events(
            next_page_token=self._token, wait_new_event=True
        )
        await events.fetch_next_page()
        self._token = events.next_page_token
        if self._token is None:
            _POSITIONS.forget(self._key)
            if fresh:
                # Closed before the pace first looked (terminated, say): nothing to wait for.
                await asyncio.sleep(fallback_seconds)
            return True
        _POSITIONS.put(self._key, self._token)
        return any(
            event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
            for event in events.current_page or ()
        )


def run_key_for(
    run_input: RunAgentInput, principal: str, digests: Sequence[bytes], state: str | None
) -> str:
    """The update id for a run: the same request sent twice by the same principal is
    the same update.

    Temporal answers a repeated update id with the first update's outcome, so a client
    retrying a run gets its events instead of a second execution. The digest tells apart
    different requests that reuse a ``runId``, and different senders of one request. It
    is over the input without its messages and its state, as canonical JSON, the
    messages' ``digests`` (``SentMessages.digests``) and the state's digest
    (``known_state.digest``), both of which the gateway computes for the run anyway: a
    long conversation, or a large state, is serialised once per run, not twice.

    Args:
        state: ``known_state.digest`` of ``run_input.state``; where it is ``None``, the
            state is keyed as it is.
    """
    left_out: dict[str, Any] = {"messages": []}
    if state is not None:
        left_out["state"] = None
    rest = run_input.model_copy(update=left_out).model_dump(mode="json", by_alias=True)
    canonical = json.dumps([principal, rest, state], sort_keys=True).encode()
    digest = hashlib.sha256(canonical + b"".join(digests)).hexdigest()[:16]
    return f"{run_input.run_id}:{digest}"


class RunStream(Protocol):
    """A run handed to its thread, whose events can be streamed once."""

    def pages(self) -> AsyncIterator[list[SequencedEvent]]:
        """The run's events in order, ending with its terminal event, in pages: the
        events that arrived together, which the gateway writes to the client at once;
        an empty page, a keepalive, after ``KEEPALIVE_SECONDS`` without events.

        Raises:
            WorkflowUpdateFailedError: The thread rejected the run; its cause carries
                the stable code.
        """
        ...


FIRST_READ_PER_ACCEPTANCE = 3
"""A run in flight is first read this many times as long after its acceptance as it took
to be accepted, when that is longer than the setting (:func:`first_read_seconds`): an
approved tool's run waits for its activity, for the workflow task that takes the
result, and for its reply's way back, each about as long as for its acceptance."""
FIRST_READ_MAX_SECONDS = 1.0
"""However long a run took to be accepted, its first read comes at most this long after."""


def first_read_seconds(least: float, waited: float) -> float:
    """How long after its acceptance a run is first read, if it has not ended: ``least``
    (``stream_first_read_seconds``), or longer on a loaded stack.

    A run is accepted by a workflow task, and each later task of the run (after a tool,
    say) waits in the same queues, as long as that one did, give or take. So a run that
    takes ``waited`` seconds to be accepted and needs only a task or two more, as most
    do, is not read until :data:`FIRST_READ_PER_ACCEPTANCE` times that: on a saturated
    stack it ends first, its events come whole with its result and it costs no query,
    which would otherwise load the stack further (``docs/bench.md``, "A run's first
    read under load"). A longer run's first events reach its client that much later, at
    most :data:`FIRST_READ_MAX_SECONDS` after its acceptance.
    """
    return max(least, min(FIRST_READ_MAX_SECONDS, FIRST_READ_PER_ACCEPTANCE * waited))


class AcceptedRun:
    """A run accepted by its thread workflow."""

    def __init__(
        self,
        client: Client,
        thread: WorkflowHandle[ThreadWorkflow, None],
        update: WorkflowUpdateHandle[RunReply],
        settings: Settings,
        sent_at: float,
        resend: Callable[[], Awaitable[WorkflowUpdateHandle[RunReply]]] | None = None,
        messages: Sequence[Message] = (),
        state: dict[str, Any] | None = None,
        known: KnownMessages | None = None,
    ) -> None:
        """
        Args:
            settings: How often to read the run while it is in flight
                (``stream_first_read_seconds``, ``stream_poll_seconds``).
            sent_at: When the gateway sent the run (``time.monotonic()``); it was
                accepted just now.
            resend: Sends the run again whole, for a run sent without the messages or
                the state its thread has (``workflows.known_messages``,
                ``workflows.known_state``), which the thread rejects when it does not
                have them.
            messages: The client's conversation, whose first messages fill in the
                snapshots of a reply, or of a page read while the run is in flight,
                that leaves them out.
            state: The client's state, left out of the run, from which the state
                snapshots of its reply are made whole.
            known: The first of ``messages`` that the run left out, which the pages
                read while it is in flight leave out too.
        """
        self._client = client
        self._thread = thread
        self._resend = resend
        self._messages = messages
        self._state = state
        self._known = known
        self._poll_seconds = settings.stream_poll_seconds
        self._first_read_seconds = first_read_seconds(
            settings.stream_first_read_seconds, time.monotonic() - sent_at
        )
        self._handed(update)

    def _handed(self, update: WorkflowUpdateHandle[RunReply]) -> None:
        """Read the run of ``update`` from the workflow run it went to: once that run
        continues as new, the thread's next run has not run a workflow task yet, and a
        query sent there waits about a second for one."""
        self._update = update
        self._run = self._client.get_workflow_handle(self._thread.id, run_id=update.workflow_run_id)
        self._pace = _Pace(self._run, self._poll_seconds, self._first_read_seconds)

    async def pages(self) -> AsyncIterator[list[SequencedEvent]]:
        """See :meth:`RunStream.pages`.

        The first read waits :func:`first_read_seconds`: a run shorter than that
        arrives whole with the update's result, for no query at all. A read that no
        worker answers in time (its worker killed, or replaced in a deploy) is waited
        out as a follower's is: the run goes on without it, and its next workflow task
        comes from the worker that takes the thread over, which is when it is read
        again. So is a Temporal server unreachable for longer than the SDK retries the
        update's result (a server restarting, say): the run is durable there, and its
        result is asked for again every ``RETRY_AFTER_SECONDS`` until it comes.
        """
        result = asyncio.ensure_future(self._update.result())
        after = 0
        quiet = _Quiet()
        fallback_seconds: float = self._poll_seconds
        lost = False
        try:
            while True:
                due = asyncio.ensure_future(self._pace.due(fallback_seconds))
                try:
                    async for keepalive in quiet.until(result, due):
                        yield keepalive
                finally:
                    due.cancel()
                if result.done() and self._resend is not None and _asks_resend(result):
                    # Rejected before anything was recorded: the same update, whole.
                    self._handed(await self._resend())
                    self._resend = self._known = None
                    result = asyncio.ensure_future(self._update.result())
                    continue
                if result.done() and _unreachable(result):
                    if not lost:
                        log.warning(
                            "run %s of %s waits for Temporal", self._update.id, self._thread.id
                        )
                        lost = True
                    result = asyncio.ensure_future(self._result_after(RETRY_AFTER_SECONDS))
                    continue
                if result.done():
                    break
                query = asyncio.ensure_future(
                    self._run.query(
                        ThreadWorkflow.events,
                        EventsQuery(run_key=self._update.id, after=after, known=self._known),
                        # A workflow run that has closed (continued as new) would be
                        # replayed whole by a worker to answer: under Worker Versioning,
                        # a history of hundreds of runs. Its reply has every event anyway.
                        reject_condition=QueryRejectCondition.NOT_OPEN,
                        rpc_timeout=READ_TIMEOUT,
                    )
                )
                async with contextlib.aclosing(quiet.reading(query, result)) as keepalives:
                    async for keepalive in keepalives:
                        yield keepalive
                if not query.done():
                    # The run ended meanwhile and its reply holds every event.
                    continue
                failure = query.exception()
                if isinstance(failure, WorkflowQueryRejectedError):
                    await asyncio.wait({result})
                    continue
                if _transient(failure) or isinstance(failure, WorkflowQueryFailedError):
                    # A worker that failed the read (one taking the thread over may
                    # refuse a state it cannot vouch for, ``workflows.runner``) is
                    # asked again; the run's result brings its events in any case.
                    self._pace.read(False)
                    fallback_seconds = RETRY_AFTER_SECONDS
                    continue
                fallback_seconds = self._poll_seconds
                page = query.result()
                self._pace.read(bool(page.events))
                if page.events:
                    after = page.events[-1].seq
                    quiet.sent()
                    yield self._prefixed(page.events, page.snapshot_prefix)
            rest = [item for item in self._whole(result.result()) if item.seq > after]
            if rest:
                yield rest
        finally:
            result.cancel()

    async def _result_after(self, seconds: float) -> RunReply:
        await asyncio.sleep(seconds)
        return await self._update.result()

    def _whole(self, reply: RunReply) -> list[SequencedEvent]:
        """The events of ``reply`` with their snapshots whole: what it left out of them
        is the client's."""
        events = self._prefixed(reply.events, reply.snapshot_prefix)
        if reply.state_patches is not None:
            assert self._state is not None, "a thread patches only the state it was sent"
            events = known_state.fill_in(events, self._state, reply.state_patches)
        return events

    def _prefixed(self, events: list[SequencedEvent], prefix: int | None) -> list[SequencedEvent]:
        """``events`` with the client's first ``prefix`` messages put back in their
        snapshots, which left them out."""
        if not prefix:
            return events
        messages = self._messages[:prefix]
        return [_with_prefix(item, messages) for item in events]


_UNREAD: set[asyncio.Future[Any]] = set()
"""Queries whose answers no stream reads any more, held until they are answered."""


def _unread(query: asyncio.Future[Any]) -> None:
    """Let ``query`` be answered, unread. Cancelled instead, its worker would answer a
    query the server has dropped and log a warning for each."""
    _UNREAD.add(query)
    query.add_done_callback(_forget)


def _forget(query: asyncio.Future[Any]) -> None:
    _UNREAD.discard(query)
    if not query.cancelled():
        query.exception()  # Retrieved: nobody awaits it, and it may have failed.


def _asks_resend(result: asyncio.Future[RunReply]) -> bool:
    """Whether the thread rejected the run for leaving out messages or a state it does
    not have, or, on a build older than ``workflows.known_state``, for coming as an
    update it has no handler for (which the SDK rejects as a ``RuntimeError``, a type
    the thread's own rejections never have)."""
    error = result.exception()
    if not (
        isinstance(error, WorkflowUpdateFailedError) and isinstance(error.cause, ApplicationError)
    ):
        return False
    cause = error.cause
    return cause.type == known_messages.RESEND or (
        cause.type == "RuntimeError" and known_state.RUN_ON_KNOWN_STATE in cause.message
    )


def _unreachable(result: asyncio.Future[RunReply]) -> bool:
    """Whether a run's result could not be fetched for Temporal being unreachable past
    the SDK's retries (:data:`TRANSIENT`), not for anything the run did."""
    error = result.exception()
    if isinstance(error, WorkflowUpdateRPCTimeoutOrCancelledError):
        error = error.__cause__
    return _transient(error)


def _with_prefix(item: SequencedEvent, prefix: Sequence[Message]) -> SequencedEvent:
    """``item``, a ``MESSAGES_SNAPSHOT`` of a reply without its first messages, whole."""
    event = item.event
    if not isinstance(event, MessagesSnapshotEvent):
        return item
    whole = event.model_copy(update={"messages": [*prefix, *event.messages]})
    return item.model_copy(update={"event": whole})


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
    return await thread.query(ThreadWorkflow.run_record, run_id, rpc_timeout=READ_TIMEOUT)


async def attach(
    thread: WorkflowHandle[ThreadWorkflow, None], run: RunRecord, after: int, poll_seconds: float
) -> AsyncIterator[list[SequencedEvent]]:
    """The run's events with ``seq > after``, then, while it is in flight, the live rest,
    in pages as :meth:`RunStream.pages`, keepalives and reads no worker answered as
    there.

    Ends after the run's terminal event; a finished run is read back at once. A run in
    flight is read as :class:`_Pace` has it.
    """
    pace = _Pace(thread, poll_seconds)
    quiet = _Quiet()
    while True:
        query = asyncio.ensure_future(
            thread.query(
                ThreadWorkflow.events,
                EventsQuery(run_key=run.key, after=after),
                rpc_timeout=READ_TIMEOUT,
            )
        )
        async with contextlib.aclosing(quiet.reading(query)) as keepalives:
            async for keepalive in keepalives:
                yield keepalive
        fallback_seconds: float = poll_seconds
        if _transient(query.exception()):
            pace.read(False)
            fallback_seconds = RETRY_AFTER_SECONDS
        else:
            page = query.result()
            if page.events:
                after = page.events[-1].seq
                quiet.sent()
                yield page.events
            if page.ended:
                return
            pace.read(bool(page.events))
        async with contextlib.aclosing(quiet.over(pace.due(fallback_seconds))) as keepalives:
            async for keepalive in keepalives:
                yield keepalive


async def read_log(thread: WorkflowHandle[ThreadWorkflow, None], after: int) -> LogPage:
    """The thread's owner and the first page of its events with ``seq > after``."""
    return await thread.query(ThreadWorkflow.log, LogQuery(after=after), rpc_timeout=READ_TIMEOUT)


async def follow(
    client: Client,
    thread_id: str,
    after: int,
    first: LogPage,
    poll_seconds: float,
    idle_seconds: float,
) -> AsyncIterator[list[SequencedEvent]]:
    """Thread ``thread_id``'s events with ``seq > after``, starting with ``first``
    (:func:`read_log`), then every event the thread logs, whichever run it belongs to
    (a client's, an expiry's, an operator's...), in pages as :meth:`RunStream.pages`;
    an empty page after ``KEEPALIVE_SECONDS`` without events.

    The thread is read at once while it has more, every ``poll_seconds`` while a run's
    events flow, and otherwise (idle, waiting, a run between events) as soon as its
    workflow has completed a workflow task (:class:`_Pace`), across its continue-as-new
    runs; every ``idle_seconds`` where Temporal does not let the gateway watch the
    history. A Temporal that is unreachable for a while is waited out. It ends when the
    thread's workflow is gone (or closed, after its last events), or when its caller
    stops reading.
    """
    thread = thread_handle(client, thread_id)
    pace = _Pace(thread, poll_seconds)
    page: LogPage | None = first
    quiet = _Quiet()
    while True:
        if page is not None and page.events:
            after = page.events[-1].seq
            quiet.sent()
            yield page.events
        if page is None or not page.more:
            if page is None:
                wait = asyncio.sleep(idle_seconds)
            else:
                pace.read(page.running and bool(page.events))
                wait = pace.due(poll_seconds if page.running else idle_seconds)
            async with contextlib.aclosing(quiet.over(wait)) as keepalives:
                async for keepalive in keepalives:
                    yield keepalive
        read = asyncio.ensure_future(_read_open_log(client, thread, after))
        async with contextlib.aclosing(quiet.reading(read)) as keepalives:
            async for keepalive in keepalives:
                yield keepalive
        try:
            page = read.result()
        except WorkflowQueryRejectedError:
            async for events in _last_events(thread, after):
                yield events
            return
        except WorkflowQueryFailedError as err:
            if str(err) != STALE_TIME:
                # E.g. a worker of an older build, without the query, mid-deploy.
                log.warning("stopped following %s: %s", thread.id, err)
                return
            # A worker taking the thread over refused a state it cannot vouch for
            # (``workflows.runner``): read again.
            page = None
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return
            if not _transient(err):
                # A failure a reconnect sorts out better.
                log.warning("stopped following %s: %s", thread.id, err.status.name)
                return
            page = None


async def _read_open_log(
    client: Client, thread: WorkflowHandle[ThreadWorkflow, None], after: int
) -> LogPage:
    """The first page of the thread's events with ``seq > after``, read from its
    workflow's open run.

    A query for a workflow's current run can meet the run it is just leaving: Temporal
    then rejects it as ``CONTINUED_AS_NEW``, though the thread lives on in the next run,
    which carries its log on. Such a query is asked again of the run current by then;
    each such rejection stands for a continue-as-new, so this ends.

    Args:
        thread: The thread's workflow, or one of its runs.

    Raises:
        WorkflowQueryRejectedError: The thread's workflow has closed for good.
    """
    handle = thread
    while True:
        try:
            return await handle.query(
                ThreadWorkflow.log,
                LogQuery(after=after),
                reject_condition=QueryRejectCondition.NOT_OPEN,
                rpc_timeout=READ_TIMEOUT,
            )
        except WorkflowQueryRejectedError as err:
            if err.status != WorkflowExecutionStatus.CONTINUED_AS_NEW:
                raise
        handle = client.get_workflow_handle(thread.id)


def _transient(failure: BaseException | None) -> bool:
    """Whether ``failure`` of a read is one a stream waits out (:data:`TRANSIENT`)."""
    return isinstance(failure, RPCError) and failure.status in TRANSIENT


class _Quiet:
    """How long a stream has sent nothing, and the keepalives that makes it owe."""

    def __init__(self) -> None:
        self._since = time.monotonic()

    def sent(self) -> None:
        """Note that the stream just sent events."""
        self._since = time.monotonic()

    async def until(self, *waits: asyncio.Future[Any]) -> AsyncIterator[list[SequencedEvent]]:
        """An empty page (a keepalive) each ``KEEPALIVE_SECONDS`` the stream stays
        quiet, until one of ``waits`` is done; the waits go on meanwhile."""
        while True:
            left = KEEPALIVE_SECONDS - (time.monotonic() - self._since)
            done, _ = await asyncio.wait(
                waits, timeout=max(left, 0.0), return_when=asyncio.FIRST_COMPLETED
            )
            if done:
                return
            self._since = time.monotonic()
            yield []

    async def reading(
        self, read: asyncio.Future[Any], *also: asyncio.Future[Any]
    ) -> AsyncGenerator[list[SequencedEvent], None]:
        """The keepalives of :meth:`until` while ``read``, a query, waits (for a worker,
        up to ``READ_TIMEOUT``), until it or one of ``also`` is done. A read left
        unanswered (``also`` done first, or the stream closed) is answered unread."""
        try:
            async for keepalive in self.until(read, *also):
                yield keepalive
        finally:
            if not read.done():
                _unread(read)

    async def over(self, wait: Awaitable[Any]) -> AsyncGenerator[list[SequencedEvent], None]:
        """Await ``wait``, with the keepalives of :meth:`until` meanwhile; closed early,
        ``wait`` is cancelled."""
        due = asyncio.ensure_future(wait)
        try:
            async for keepalive in self.until(due):
                yield keepalive
            due.result()
        finally:
            due.cancel()


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
    sent: SentMessages,
) -> RunStream:
    """Hand a run to its thread's workflow, starting the workflow on the thread's first run.

    A run whose input shows a first run (:func:`opens_thread`) that a new thread would
    take goes straight to update-with-start: a round trip fewer for every new thread
    (``docs/bench.md``, "CPU per interrupt cycle"). Should the thread exist after all,
    update-with-start delivers the run to it as a plain update would, its validator
    checking it against the thread as it is. Any other run is a plain update, which
    Temporal dispatches to the worker ~2 ms sooner than update-with-start; when there is
    no such workflow (or it has ended), the run is checked against a new thread and, if
    the thread would take it, starts one with update-with-start. Returns once the
    workflow has received the run (or the run was rejected). A rejected run raises
    ``WorkflowUpdateFailedError`` (its cause carries the stable code) from
    :meth:`RunStream.pages`, as Temporal reports rejections with the outcome. A thread
    started by the run belongs to ``principal``; on anyone else's thread the run is
    rejected as if there were none.

    An existing thread gets the run without the messages and the state it has already,
    as far as the gateway can tell (``workflows.known_messages``,
    ``workflows.known_state``); if the thread does not have them, it gets the run again,
    whole, from :meth:`RunStream.pages`.

    Args:
        sent: ``run_input``'s messages with their JSON and digests.

    Raises:
        RPCError: Temporal could not be reached.
        NotAccepted: No worker took the run within ``settings.accept_seconds``.
    """
    sent_at = time.monotonic()
    thread = thread_handle(client, run_input.thread_id)
    request = RunRequest(agent=agent.name, input=run_input, principal=principal)
    state = known_state.digest(run_input.state)
    key = run_key_for(run_input, principal, sent.digests, state)
    new_thread = ThreadState(thread_id=run_input.thread_id, agent=agent.name, owner=principal)
    if opens_thread(run_input) and _new_thread_rejects(new_thread, request, agent) is None:
        update = await _start_with_run(client, settings, request, key)
        return AcceptedRun(client, thread, update, settings, sent_at)
    known, rest = known_messages.split(run_input.messages, sent.digests)

    async def send(request: RunRequest) -> WorkflowUpdateHandle[RunReply]:
        update = thread.start_update(
            ThreadWorkflow.run_agent_on_known_state
            if request.known_state
            else ThreadWorkflow.run_agent,
            request,
            id=key,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
        return await accepted(update, settings.accept_seconds)

    try:
        if known is None and state is None:
            update = await send(request)
            return AcceptedRun(client, thread, update, settings, sent_at)
        left_out: dict[str, Any] = {"messages": rest}
        if state is not None:
            left_out["state"] = None
        short = request.model_copy(
            update={
                "input": run_input.model_copy(update=left_out),
                "known": known,
                "known_state": state,
            }
        )
        update = await send(short)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        rejection = _new_thread_rejects(new_thread, request, agent)
        if rejection is not None:
            return RejectedRun(rejection)
        update = await _start_with_run(client, settings, request, key)
        return AcceptedRun(client, thread, update, settings, sent_at)
    return AcceptedRun(
        client,
        thread,
        update,
        settings,
        sent_at,
        resend=lambda: send(request),
        messages=run_input.messages,
        state=run_input.state if state is not None else None,
        known=known,
    )


def opens_thread(run_input: RunAgentInput) -> bool:
    """Whether ``run_input`` looks like its thread's first run: it resumes nothing and
    holds no message the agent's side wrote (an assistant's reply, a tool's result),
    which a thread that has run before would hold, as clients resend the whole
    conversation. A guess that only picks the first round trip: a wrong one costs time,
    never a different outcome."""
    return not run_input.resume and all(
        message.role in ("user", "system", "developer") for message in run_input.messages
    )


def _new_thread_rejects(
    thread: ThreadState, request: RunRequest, agent: AgentDefinition
) -> ApplicationError | None:
    """Why a new thread would reject ``request``, if it would."""
    try:
        check_run(thread, request, agent, datetime.now(UTC))
    except ApplicationError as rejection:
        return rejection
    return None


async def _start_with_run(
    client: Client, settings: Settings, request: RunRequest, key: str
) -> WorkflowUpdateHandle[RunReply]:
    """Hand ``request`` to its thread with update-with-start, which starts the thread's
    workflow if there is none (or it has ended)."""
    start = _start_thread(settings, request.agent, request.input.thread_id, request.principal)
    update = client.start_update_with_start_workflow(
        ThreadWorkflow.run_agent,
        request,
        id=key,
        start_workflow_operation=start,
        wait_for_stage=WorkflowUpdateStage.ACCEPTED,
    )
    try:
        return await accepted(update, settings.accept_seconds)
    except (RPCError, NotAccepted):
        # The SDK fails the start's own handle with the same error, or with the
        # cancellation of the call when no worker accepted in time: take it (the handle
        # is settled by then), or asyncio logs it as never retrieved.
        with contextlib.suppress(RPCError, asyncio.CancelledError):
            await start.workflow_handle()
        raise


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
