"""The thread workflow: one Temporal workflow per AG-UI thread."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        PROTOCOL_VERSION,
        BaseEvent,
        Message,
        MessagesSnapshotEvent,
        RunErrorEvent,
        RunFinishedEvent,
        RunFinishedSuccessOutcome,
        RunStartedEvent,
        StateSnapshotEvent,
    )

    from workflows import search_attributes
    from workflows.agents import AGENTS
    from workflows.errors import ErrorCode, rejection
    from workflows.models import (
        EventPage,
        EventsQuery,
        RunRecord,
        RunReply,
        RunRequest,
        RunStatus,
        SequencedEvent,
        ThreadStart,
        ThreadState,
        ThreadStatus,
        ThreadView,
    )
    from workflows.runtime import RunContext


@workflow.defn
class ThreadWorkflow:
    """One AG-UI thread: its messages, shared state, runs and their events.

    The workflow lives as long as the thread; each AG-UI run is one update.

    Update:
        run_agent(RunRequest) -> RunReply: executes one run to its terminal event and
            returns the run's events. Its validator rejects input for another thread or
            agent without touching history.
    Queries:
        events(EventsQuery) -> EventPage: a run's events after an offset, which the
            gateway streams while the update is in flight.
        view() -> ThreadView: the thread as ``GET /threads/{thread_id}`` shows it.
    """

    @workflow.init
    def __init__(self, start: ThreadStart) -> None:
        self._thread = start.state or ThreadState(thread_id=start.thread_id, agent=start.agent)
        self._message_ids = {message.id for message in self._thread.messages}
        self._runs = {run.key: run for run in self._thread.runs}
        # Runs execute one at a time, in the order their updates were accepted.
        self._run_lock = asyncio.Lock()

    @workflow.run
    async def run(self, start: ThreadStart) -> None:
        """Keep the thread open; all of its work arrives as updates."""
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def run_agent(self, request: RunRequest) -> RunReply:
        """Execute one AG-UI run and return its events, terminal event last."""
        async with self._run_lock:
            # Checked again: the thread may have changed while this run waited its turn.
            self._check(request)
            run = self._open_run(request)
            context = RunContext(
                input=request.input,
                messages=self._thread.messages,
                state=self._thread.state,
                emit=lambda event: self._emit(run, event),
                add_message=self._add_message,
            )
            try:
                await AGENTS[self._thread.agent].run(context)
            except ActivityError as err:
                cause = err.cause or err
                self._emit(
                    run,
                    RunErrorEvent(
                        message=f"The agent failed: {cause}", code=ErrorCode.AGENT_FAILED
                    ),
                )
                self._close_run(run, "failed")
            else:
                self._emit(run, StateSnapshotEvent(snapshot=self._thread.state))
                self._emit(run, MessagesSnapshotEvent(messages=list(self._thread.messages)))
                self._emit(
                    run,
                    RunFinishedEvent(
                        thread_id=self._thread.thread_id,
                        run_id=run.run_id,
                        outcome=RunFinishedSuccessOutcome(),
                    ),
                )
                self._close_run(run, "succeeded")
            return RunReply(run_key=run.key, events=self._events_of(run))

    @run_agent.validator
    def _validate_run_agent(self, request: RunRequest) -> None:
        self._check(request)

    @workflow.query
    def events(self, query: EventsQuery) -> EventPage:
        """A run's events after ``query.after``; empty while the run waits its turn."""
        run = self._runs.get(query.run_key)
        if run is None:
            return EventPage(events=[], ended=False)
        return EventPage(
            events=self._events_of(run, after=query.after), ended=run.status != "running"
        )

    @workflow.query
    def view(self) -> ThreadView:
        """The thread's messages, state, open interrupts and runs."""
        return ThreadView(
            thread_id=self._thread.thread_id,
            agent=self._thread.agent,
            status="running" if self._run_lock.locked() else "idle",
            messages=self._thread.messages,
            state=self._thread.state,
            interrupts=self._thread.interrupts,
            runs=self._thread.runs,
        )

    def _check(self, request: RunRequest) -> None:
        """Reject a run this thread must not execute; changes nothing."""
        run_input = request.input
        if run_input.thread_id != self._thread.thread_id:
            raise rejection(
                ErrorCode.THREAD_MISMATCH,
                f"This is thread {self._thread.thread_id!r}; "
                f"the input names thread {run_input.thread_id!r}.",
            )
        if request.agent != self._thread.agent:
            raise rejection(
                ErrorCode.AGENT_MISMATCH,
                f"Thread {self._thread.thread_id!r} belongs to agent {self._thread.agent!r}, "
                f"not {request.agent!r}.",
            )
        if run_input.state is not None and not isinstance(run_input.state, dict):
            raise rejection(ErrorCode.INVALID_STATE, "The input's state must be a JSON object.")

    def _open_run(self, request: RunRequest) -> RunRecord:
        """Record the run, take in its new messages and state, emit ``RUN_STARTED``."""
        update = workflow.current_update_info()
        assert update is not None, "runs only open inside the run_agent update"
        run = RunRecord(
            key=update.id,
            run_id=request.input.run_id,
            started_at=workflow.now(),
            first_seq=self._next_seq(),
        )
        self._thread.runs.append(run)
        self._runs[run.key] = run
        for message in request.input.messages:
            self._add_message(message)
        if request.input.state:
            self._thread.state.update(request.input.state)
        self._emit(
            run,
            RunStartedEvent(
                thread_id=self._thread.thread_id,
                run_id=run.run_id,
                parent_run_id=request.input.parent_run_id,
                protocol_version=PROTOCOL_VERSION,
            ),
        )
        self._publish_status("running")
        return run

    def _add_message(self, message: Message) -> None:
        """Add a message to the conversation unless it is there already.

        Clients resend the whole conversation on each run, the agent's own replies
        included, so a message id the thread knows is skipped.
        """
        if message.id not in self._message_ids:
            self._message_ids.add(message.id)
            self._thread.messages.append(message)

    def _close_run(self, run: RunRecord, status: RunStatus) -> None:
        run.status = status
        run.finished_at = workflow.now()
        self._publish_status("idle")

    def _emit(self, run: RunRecord, event: BaseEvent) -> None:
        if event.timestamp is None:
            event.timestamp = int(workflow.now().timestamp() * 1000)
        seq = self._next_seq()
        self._thread.events.append(SequencedEvent(seq=seq, run_key=run.key, event=event))
        run.last_seq = seq

    def _next_seq(self) -> int:
        events = self._thread.events
        return events[-1].seq + 1 if events else 1

    def _events_of(self, run: RunRecord, after: int = 0) -> list[SequencedEvent]:
        """The run's events with ``seq > after``; runs never interleave, so a slice."""
        events = self._thread.events
        if not events or run.last_seq < run.first_seq:
            return []
        base = events[0].seq
        start = max(run.first_seq, after + 1) - base
        return events[max(start, 0) : run.last_seq - base + 1]

    def _publish_status(self, status: ThreadStatus) -> None:
        """Mirror the thread's status into its search attributes for operators."""
        workflow.upsert_search_attributes(
            [
                search_attributes.THREAD_STATUS.value_set(status),
                search_attributes.LAST_ACTIVITY.value_set(workflow.now()),
            ]
        )
