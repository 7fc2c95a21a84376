"""The thread workflow: one Temporal workflow per AG-UI thread."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        PROTOCOL_VERSION,
        Event,
        Interrupt,
        Message,
        MessagesSnapshotEvent,
        ResumeEntry,
        RunAgentInput,
        RunErrorEvent,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunFinishedSuccessOutcome,
        RunStartedEvent,
        StateSnapshotEvent,
    )

    # By its full name, so a sandbox passes the worker's table of agents through;
    # ``from workflows import served`` would import an empty copy into it.
    import workflows.served as served
    from activities.chat import STREAM_SIGNAL, ModelDelta
    from activities.reminders import ReminderNotice, Reminders
    from workflows import metrics, visibility
    from workflows.details import current_details
    from workflows.errors import ErrorCode, rejection
    from workflows.interrupts import answer_key, check_resume, is_replay, parse_expiry
    from workflows.models import (
        Answer,
        AppliedAnswer,
        AuditOutcome,
        AuditRecord,
        EventPage,
        EventsQuery,
        LoggedEvent,
        OperatorResult,
        OperatorResume,
        Reminder,
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
    from workflows.sdk.agent import AgentDefinition

RUNS_CARRIED = 10
"""Runs (with their events) a thread carries into a new workflow run, so clients can
still re-read or reconnect to its recent runs after a continue-as-new."""
REMINDER_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=10)
)
"""Backoff for an unreachable webhook; it stops at the interrupt's deadline."""


@workflow.defn
class ThreadWorkflow:
    """One AG-UI thread: its messages, shared state, interrupts, runs and their events.

    The workflow lives as long as the thread. Each AG-UI run is one update, in which the
    agent's ``run`` (new input) or ``resume`` (all answers in) works until it returns.
    Between runs the thread is data only, open interrupts included, so after
    ``start.continue_as_new_after_runs`` runs (by default every run, or when Temporal
    suggests it) it continues as new with that data, its deadlines unchanged: a waiting
    thread's history then replays no agent code, whatever a deploy changed.

    Update:
        run_agent(RunRequest) -> RunReply: executes one run to its terminal event and
            returns the run's events. Its validator enforces the interrupt contract and
            rejects bad input without touching history.
    Queries:
        events(EventsQuery) -> EventPage: a run's events after an offset, which the
            gateway streams while the update is in flight.
        view() -> ThreadView: the thread as ``GET /threads/{thread_id}`` shows it.
        run_record(str) -> RunRecord | None: the latest run with a ``runId``, which the
            gateway reconnects a client to.
    """

    @workflow.init
    def __init__(self, start: ThreadStart) -> None:
        self._thread = start.state or ThreadState(thread_id=start.thread_id, agent=start.agent)
        self._message_ids = {message.id for message in self._thread.messages}
        self._runs = {run.key: run for run in self._thread.runs}
        # Runs (and expiries) change the thread one at a time, in arrival order.
        self._run_lock = asyncio.Lock()
        self._run: RunRecord | None = None
        """The run the agent's events go to."""
        self._turn: asyncio.Task[None] | None = None
        """The agent's work in the run in progress; it never outlives the run."""
        self._runs_here = 0
        """Runs this workflow run has opened, for the continue-as-new bound."""
        self._continue_after = start.continue_as_new_after_runs
        self._published: list[Interrupt] = self._thread.open_interrupts
        """The open interrupts as last written to the memo (a continue-as-new hands the
        new workflow run the memo of the one before)."""
        self._listeners: dict[str, Callable[[ModelDelta], None]] = {}
        """Who takes a model activity's streamed output, by activity id."""
        self._timed: set[str] = set()
        """Interrupts and reminders with a timer in this workflow run (see ``_time``)."""

    @workflow.run
    async def run(self, start: ThreadStart) -> None:
        """Serve runs as updates until the history is long enough to continue as new."""
        # Deadlines are absolute, so carried interrupts expire exactly when they would
        # have; a reminder in flight at the continue-as-new is sent again (same key).
        for interrupt in self._thread.open_interrupts:
            self._watch_expiry(interrupt)
        for reminder in self._thread.reminders:
            self._time(reminder)
        workflow.set_current_details(self._details())
        await workflow.wait_condition(lambda: self._should_continue() and self._between_runs())
        waiting_on = self._thread.open_interrupts
        workflow.continue_as_new(
            ThreadStart(
                thread_id=start.thread_id,
                agent=start.agent,
                continue_as_new_after_runs=start.continue_as_new_after_runs,
                state=self._carried(),
            ),
            memo=visibility.memo(waiting_on),
            search_attributes=TypedSearchAttributes(self._attributes()),
        )

    def _should_continue(self) -> bool:
        return (
            self._runs_here >= self._continue_after
            or workflow.info().is_continue_as_new_suggested()
        )

    def _between_runs(self) -> bool:
        """No run in progress or waiting its turn: the thread is all in ``self._thread``."""
        return (
            self._run is None and not self._run_lock.locked() and workflow.all_handlers_finished()
        )

    def _carried(self) -> ThreadState:
        """The thread for the next workflow run: everything but its older runs' events."""
        runs = self._thread.runs[-RUNS_CARRIED:]
        first_seq = runs[0].first_seq if runs else self._next_seq()
        events = [item for item in self._thread.events if item.seq >= first_seq]
        return self._thread.model_copy(update={"runs": runs, "events": events})

    @workflow.update
    async def run_agent(self, request: RunRequest) -> RunReply:
        """Execute one AG-UI run and return its events, terminal event last."""
        async with self._run_lock:
            # Checked again: the thread may have changed while this run waited its turn.
            self._check(request)
            earlier = self._earlier_run(request)
            if earlier is not None:
                return RunReply(run_key=earlier.key, events=self._replay(earlier, request))
            run = self._open_run(request)
            if request.input.resume:
                # The tool calls being answered were announced in an earlier run; the
                # snapshot puts them in this run's view so its TOOL_CALL_RESULTs resolve.
                self._emit_messages_snapshot()
                self._apply(request.input.resume, run)
                self._resume_if_answered(request.input)
            else:
                agent = self._agent()
                self._start_turn(agent.run, request.input)
            await self._finish_run(run)
            return RunReply(run_key=run.key, events=self._events_of(run))

    @run_agent.validator
    def _validate_run_agent(self, request: RunRequest) -> None:
        self._check(request)

    @workflow.signal(name=STREAM_SIGNAL)
    def model_stream(self, delta: ModelDelta) -> None:
        """A model activity's output so far; the run that awaits it streams it on (see
        ``activities.chat.DeltaSender``). Late deltas, of a step already done, are dropped."""
        listener = self._listeners.get(delta.activity_id)
        if listener is not None:
            listener(delta)

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
            status=self._status(),
            messages=self._thread.messages,
            state=self._thread.state,
            interrupts=self._thread.open_interrupts,
            runs=self._thread.runs,
            audit=self._thread.audit,
            memory=self._thread.memory,
        )

    @workflow.query
    def run_record(self, run_id: str) -> RunRecord | None:
        """The latest run with AG-UI ``runId`` ``run_id`` (a resume may reuse one), if any."""
        return next((run for run in reversed(self._thread.runs) if run.run_id == run_id), None)

    @workflow.update(name="operator_resume")
    async def operator_resume(self, request: OperatorResume) -> OperatorResult:
        """An operator answers the open interrupts (``temporal workflow update``).

        Checked exactly as a client's resume: an invalid one is rejected by the
        validator, before anything is written. Applied in a run of its own, recorded in
        the audit trail with the operator's name; the client's next run sees the result.
        """
        return await self._operator_resume(request)

    @operator_resume.validator
    def _validate_operator_resume(self, request: OperatorResume) -> None:
        self._check_operator(request)

    @workflow.signal(name="operator_resume")
    async def operator_resume_signal(self, request: OperatorResume) -> None:
        """The same as a signal, which the Web UI's "Send a Signal" can send. A signal
        cannot answer, so a rejected one is recorded in the audit trail instead."""
        with contextlib.suppress(ApplicationError):
            await self._operator_resume(request)

    async def _operator_resume(self, request: OperatorResume) -> OperatorResult:
        async with self._run_lock:
            try:
                earlier = self._check_operator(request)
            except ApplicationError as error:
                self._audit(request, "rejected", error=error)
                raise
            if earlier is not None:
                # The run may be no longer carried; its key still names it.
                run_id = self._runs[earlier].run_id if earlier in self._runs else earlier
                self._audit(request, "repeated", run_id=run_id)
                return OperatorResult(run_id=run_id, outcome="repeated")
            run_id = f"operator-{workflow.uuid4()}"
            run = self._start_run(run_id, run_id, None)
            self._emit_messages_snapshot()
            self._apply(request.resume, run)
            self._audit(request, "applied", run_id=run_id)
            self._resume_if_answered(self._unrequested_input(run))
            await self._finish_run(run)
            return OperatorResult(run_id=run_id, outcome="applied")

    def _check_operator(self, request: OperatorResume) -> str | None:
        """Reject an operator's resume the thread must not apply; the key of the run
        that already applied exactly this resume, if it is a repeat."""
        if not request.resume:
            raise rejection(ErrorCode.EMPTY_RESUME, "operator_resume needs resume entries.")
        served.check_served(workflow.info().task_queue, self._thread.agent)
        run_key = is_replay(request.resume, self._thread.applied)
        if run_key is not None:
            return run_key
        check_resume(
            self._thread.open_interrupts, request.resume, self._thread.applied, workflow.now()
        )
        return None

    def _audit(
        self,
        request: OperatorResume,
        outcome: AuditOutcome,
        run_id: str | None = None,
        error: ApplicationError | None = None,
    ) -> None:
        self._thread.audit.append(
            AuditRecord(
                at=workflow.now(),
                operator=request.operator,
                resume=request.resume,
                outcome=outcome,
                run_id=run_id,
                error_code=error.type if error else None,
                error=error.message if error else None,
            )
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
        served.check_served(workflow.info().task_queue, self._thread.agent)
        if run_input.state is not None and not isinstance(run_input.state, dict):
            raise rejection(ErrorCode.INVALID_STATE, "The input's state must be a JSON object.")
        if self._earlier_run(request) is None:
            check_resume(
                self._thread.open_interrupts,
                run_input.resume,
                self._thread.applied,
                workflow.now(),
            )

    def _earlier_run(self, request: RunRequest) -> RunRecord | None:
        """The run this request repeats, whose events answer it again.

        Either the same update again (Temporal deduplicates update ids only within one
        workflow run, so this covers a retry across a continue-as-new), or a resume
        exactly like one already applied (contract rule 5).
        """
        update = workflow.current_update_info()
        if update is not None and update.id in self._runs:
            return self._runs[update.id]
        resume = request.input.resume
        run_key = is_replay(resume, self._thread.applied) if resume else None
        return self._runs.get(run_key) if run_key else None

    def _replay(self, run: RunRecord, request: RunRequest) -> list[SequencedEvent]:
        """The events of ``run`` again, opened and closed under the replaying ``runId``."""
        events = []
        for item in self._events_of(run):
            event = item.event
            if isinstance(event, RunStartedEvent | RunFinishedEvent):
                event = event.model_copy(update={"run_id": request.input.run_id})
            events.append(item.model_copy(update={"event": event}))
        return events

    def _agent(self) -> AgentDefinition:
        return served.agent(workflow.info().task_queue, self._thread.agent)

    def _start_turn(
        self, step: Callable[[RunContext], Coroutine[Any, Any, None]], run_input: RunAgentInput
    ) -> None:
        """Run one step of the agent (``run`` or a ``resume``) as the run's work."""
        context = RunContext(
            input=run_input,
            messages=self._thread.messages,
            state=self._thread.state,
            emit=self._emit,
            add_message=self._add_message,
            ask=self._ask,
            remind_before=self._agent().remind_before,
            memory=self._thread.memory,
            journal=self._thread.journal,
            listeners=self._listeners,
        )
        self._turn = asyncio.create_task(step(context))

    def _ask(self, interrupts: list[Interrupt], reminders: list[Reminder]) -> None:
        """Open ``interrupts``: the run ends on them once the agent's step returns."""
        self._thread.asked.extend(interrupts)
        for interrupt in interrupts:
            self._watch_expiry(interrupt)
            metrics.interrupt_opened(self._thread.agent, interrupt)
        self._thread.reminders.extend(reminders)
        for reminder in reminders:
            self._time(reminder)

    def _watch_expiry(self, interrupt: Interrupt) -> None:
        if interrupt.expires_at is not None:
            # A durable timer per deadline: it fires with or without a client.
            self._time(interrupt)

    def _time(self, item: Interrupt | Reminder) -> None:
        """Start the timer of an interrupt's deadline or of a reminder, once per workflow
        run: a thread's first run may ask before ``run`` arms what the thread carries."""
        key = _timer_key(item)
        if key in self._timed:
            return
        self._timed.add(key)
        if isinstance(item, Reminder):
            asyncio.create_task(self._remind_when_due(item))
        else:
            asyncio.create_task(self._expire_when_due(item))

    def _resume_if_answered(self, run_input: RunAgentInput) -> None:
        """Once no asked interrupt is open, hand every answer to the agent's ``resume``."""
        thread = self._thread
        if not thread.asked or thread.open_interrupts:
            return
        answers = [thread.answers[interrupt.id] for interrupt in thread.asked]
        thread.asked, thread.answers = [], {}
        agent = self._agent()
        self._start_turn(lambda context: agent.resume(context, answers), run_input)

    def _apply(self, resume: list[ResumeEntry], run: RunRecord) -> None:
        """Close the interrupts ``resume`` answers and hand the answers to the agent."""
        open_by_id = {interrupt.id: interrupt for interrupt in self._thread.open_interrupts}
        for entry in resume:
            interrupt = open_by_id.get(entry.interrupt_id)
            if interrupt is None:
                # Closed already: a cancel of an expired interrupt, or the replay of a
                # resume whose run is no longer carried (contract rule 5).
                continue
            self._close_interrupt(
                interrupt,
                Answer(interrupt=interrupt, status=entry.status, payload=entry.payload),
                key=answer_key(entry),
                run_key=run.key,
            )

    def _close_interrupt(
        self, interrupt: Interrupt, answer: Answer, key: str, run_key: str
    ) -> None:
        thread = self._thread
        thread.answers[interrupt.id] = answer
        metrics.interrupt_closed(thread.agent, interrupt, answer.status)
        # Its reminders are moot now (their tasks see that and end).
        thread.reminders = [r for r in thread.reminders if r.interrupt_id != interrupt.id]
        thread.applied[interrupt.id] = AppliedAnswer(
            interrupt_id=interrupt.id,
            status=answer.status,
            key=key,
            run_key=run_key,
            expires_at=interrupt.expires_at,
        )

    async def _expire_when_due(self, interrupt: Interrupt) -> None:
        """Close ``interrupt`` as expired at its deadline unless it is answered first.

        When that closes the thread's last open interrupt, the agent resumes at once (it
        sees the answer ``expired``) in a run of its own, so the thread accepts new input
        again without anyone having to come back.
        """
        deadline = parse_expiry(interrupt)
        assert deadline is not None
        interrupt_id = interrupt.id

        def is_open() -> bool:
            return any(i.id == interrupt_id for i in self._thread.open_interrupts)

        if not await self._until(deadline - workflow.now(), is_open, f"expiry {interrupt_id}"):
            return
        async with self._run_lock:
            if not is_open():
                return
            run = self._open_expiry_run()
            self._close_interrupt(
                interrupt,
                Answer(interrupt=interrupt, status="expired"),
                key=f"expired:{interrupt_id}",
                run_key=run.key,
            )
            self._resume_if_answered(self._unrequested_input(run))
            await self._finish_run(run)

    async def _remind_when_due(self, reminder: Reminder) -> None:
        """Post a reminder of the open interrupt at ``reminder.at``.

        Answering the interrupt cancels its reminders. Delivery retries with backoff
        until the deadline; a reminder that never arrives is logged, and the thread goes
        on exactly as if it had.
        """
        thread = self._thread

        def pending() -> bool:
            return reminder in thread.reminders

        if not await self._until(reminder.at - workflow.now(), pending, "reminder"):
            return
        interrupt = next(i for i in thread.asked if i.id == reminder.interrupt_id)
        deadline = parse_expiry(interrupt)
        assert interrupt.expires_at is not None and deadline is not None
        try:
            await workflow.execute_activity_method(
                Reminders.send_reminder,
                ReminderNotice(
                    thread_id=thread.thread_id,
                    agent=thread.agent,
                    interrupt=interrupt,
                    expires_at=interrupt.expires_at,
                    remind_at=reminder.at,
                ),
                start_to_close_timeout=timedelta(minutes=1),
                schedule_to_close_timeout=max(deadline - workflow.now(), timedelta(seconds=1)),
                retry_policy=REMINDER_RETRY,
                summary=f"reminder {interrupt.id}",
            )
        except ActivityError as error:
            workflow.logger.warning("reminder of %s not delivered: %s", interrupt.id, error.cause)
        finally:
            if pending():
                thread.reminders.remove(reminder)

    @staticmethod
    async def _until(delay: timedelta, holds: Callable[[], bool], summary: str) -> bool:
        """Wait ``delay`` (a durable timer) while ``holds()``; whether it still holds."""
        if delay > timedelta(0):
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: not holds(), timeout=delay, timeout_summary=summary
                )
        return holds()

    def _unrequested_input(self, run: RunRecord) -> RunAgentInput:
        """The input of a run no client sent: an expiry's, or an operator's resume."""
        return RunAgentInput(
            thread_id=self._thread.thread_id,
            run_id=run.run_id,
            state=self._thread.state,
            messages=[],
            tools=[],
            context=[],
            forwarded_props={},
        )

    async def _finish_run(self, run: RunRecord) -> None:
        """Let the agent's step return, then end the run, on its interrupts if it asked any."""
        turn = self._turn
        if turn is not None:
            await workflow.wait_condition(turn.done)
            self._turn = None
            error = turn.exception()
            if error is not None:
                self._emit(RunErrorEvent(message=_failure(error), code=ErrorCode.AGENT_FAILED))
                self._close_run(run, "failed")
                return
        self._emit(StateSnapshotEvent(snapshot=self._thread.state))
        self._emit_messages_snapshot()
        waiting_on = self._thread.open_interrupts
        outcome = (
            RunFinishedInterruptOutcome(interrupts=waiting_on)
            if waiting_on
            else RunFinishedSuccessOutcome()
        )
        self._emit(
            RunFinishedEvent(thread_id=self._thread.thread_id, run_id=run.run_id, outcome=outcome)
        )
        self._close_run(run, "interrupted" if waiting_on else "succeeded")

    def _open_run(self, request: RunRequest) -> RunRecord:
        """Record the run, take in its new messages and state, emit ``RUN_STARTED``."""
        update = workflow.current_update_info()
        assert update is not None, "client runs only open inside the run_agent update"
        for message in request.input.messages:
            self._add_message(message)
        if request.input.state:
            self._thread.state.update(request.input.state)
        return self._start_run(update.id, request.input.run_id, request.input.parent_run_id)

    def _open_expiry_run(self) -> RunRecord:
        """A run no client asked for: the agent continuing after an interrupt expired."""
        run_id = f"expiry-{workflow.uuid4()}"
        return self._start_run(run_id, run_id, None)

    def _start_run(self, key: str, run_id: str, parent_run_id: str | None) -> RunRecord:
        run = RunRecord(
            key=key, run_id=run_id, started_at=workflow.now(), first_seq=self._next_seq()
        )
        self._thread.runs.append(run)
        self._runs[key] = run
        self._runs_here += 1
        self._run = run
        workflow.logger.info("run started", extra={"run_id": run_id})
        self._emit(
            RunStartedEvent(
                thread_id=self._thread.thread_id,
                run_id=run_id,
                parent_run_id=parent_run_id,
                protocol_version=PROTOCOL_VERSION,
            )
        )
        self._publish_status()
        return run

    def _close_run(self, run: RunRecord, status: RunStatus) -> None:
        workflow.logger.info("run ended", extra={"run_id": run.run_id, "outcome": status})
        run.status = status
        run.finished_at = workflow.now()
        self._run = None
        if self._should_continue():
            # The next workflow run gets the thread's attributes and memo with the
            # continue-as-new; this one's are cleared, so operators' queries find only
            # the live run of each thread.
            workflow.upsert_search_attributes(visibility.cleared())
            workflow.set_current_details(self._details())
        else:
            self._publish_status()

    def _add_message(self, message: Message) -> None:
        """Add a message to the conversation unless it is there already.

        Clients resend the whole conversation on each run, the agent's own replies
        included, so a message id the thread knows is skipped.
        """
        if message.id not in self._message_ids:
            self._message_ids.add(message.id)
            self._thread.messages.append(message)

    def _emit(self, event: Event, messages_upto: int | None = None) -> None:
        """Append ``event`` to the log of the run in progress."""
        run = self._run
        assert run is not None, "agent code emits only while a run is in progress"
        if event.timestamp is None:
            event.timestamp = int(workflow.now().timestamp() * 1000)
        seq = self._next_seq()
        self._thread.events.append(
            LoggedEvent(seq=seq, run_key=run.key, event=event, messages_upto=messages_upto)
        )
        run.last_seq = seq

    def _emit_messages_snapshot(self) -> None:
        """Emit the whole conversation, logged by its length (see ``LoggedEvent``)."""
        self._emit(MessagesSnapshotEvent(messages=[]), messages_upto=len(self._thread.messages))

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
        return [self._sequenced(item) for item in events[max(start, 0) : run.last_seq - base + 1]]

    def _sequenced(self, item: LoggedEvent) -> SequencedEvent:
        """``item`` as clients see it: a messages snapshot gets its messages back."""
        event = item.event
        if item.messages_upto is not None:
            messages = self._thread.messages[: item.messages_upto]
            event = event.model_copy(update={"messages": messages})
        return SequencedEvent(seq=item.seq, run_key=item.run_key, event=event)

    def _status(self) -> ThreadStatus:
        if self._run is not None:
            return "running"
        return "waiting" if self._thread.open_interrupts else "idle"

    def _publish_status(self) -> None:
        """Show operators the thread: its status, open interrupts and earliest deadline
        as search attributes; the interrupts themselves in its memo (for ``GET
        /interrupts``); in plain words, what it waits for, as its current details.

        A run's start publishes only the status: what it waits on is published when the
        run ends, as only then is it settled (and operators look for waiting threads, not
        running ones). Each search attribute and memo update is a history event and a
        visibility write, which the bench shows in every run's latency.
        """
        settled = self._run is None
        workflow.upsert_search_attributes(visibility.updates(self._attributes(), settled))
        waiting_on = self._thread.open_interrupts
        if settled and waiting_on != self._published:
            workflow.upsert_memo(visibility.memo(waiting_on))
            self._published = list(waiting_on)
        # Not in history: the UI reads it by query.
        workflow.set_current_details(self._details())

    def _attributes(self) -> list[SearchAttributePair[Any]]:
        settled = self._run is None
        return visibility.attributes(
            self._thread.agent,
            self._status(),
            workflow.now(),
            self._thread.open_interrupts if settled else None,
        )

    def _details(self) -> str:
        return current_details(self._run, self._thread.open_interrupts, self._thread.messages)


def _timer_key(item: Interrupt | Reminder) -> str:
    if isinstance(item, Reminder):
        return f"reminder:{item.interrupt_id}:{item.at.isoformat()}"
    return f"expiry:{item.id}"


def _failure(error: BaseException) -> str:
    """What the client is told of a turn that raised ``error``.

    A model or tool that kept failing, or agent code giving up on purpose
    (``ApplicationError``), says why. Anything else is a bug in agent code: it ends the
    run instead of failing the workflow task, which Temporal would retry forever with
    the thread stuck; its details go to the worker's log, not to the client.
    """
    if isinstance(error, ActivityError):
        return f"The agent failed: {error.cause or error}"
    if isinstance(error, ApplicationError):
        return f"The agent failed: {error}"
    workflow.logger.error("agent code raised", exc_info=error)
    return "The agent failed: its code raised an error (see the worker's log)."
