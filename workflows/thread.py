"""The thread workflow: one Temporal workflow per AG-UI thread.

The workflow class keeps the thread's handlers and its run lifecycle. The event log
(``workflows/event_log.py``), the timers of deadlines and reminders
(``workflows/deadlines.py``) and what operators see of the thread (``workflows/view.py``)
are modules of their own. What the thread takes in and keeps is held to its budgets
(``workflows/budgets.py``), and nothing a client, a model or an agent does makes its
code raise out of a handler: a run that goes wrong ends with ``RUN_ERROR``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, TemporalError

with workflow.unsafe.imports_passed_through():
    import pydantic_core
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
    from activities.identity import caller_identity
    from workflows import audit, budgets, known_state, metrics, versioning, visibility
    from workflows.admission import check_run
    from workflows.approvers import OWNER_DECIDES, ApproversView, Ballot, count, with_view
    from workflows.deadlines import Deadlines
    from workflows.decisions import Decision, approved, ballot_of, check_decision, permit_for
    from workflows.delegation import Delegation
    from workflows.details import current_details
    from workflows.errors import ErrorCode, rejection
    from workflows.event_log import EventLog
    from workflows.failures import RUN_FAULTS, failure
    from workflows.interrupts import answer_key, check_resume, is_replay
    from workflows.known_messages import RESEND
    from workflows.model_streams import ModelStreams
    from workflows.models import (
        STREAM_SIGNAL,
        Answer,
        AppliedAnswer,
        AuditOutcome,
        AuditRecord,
        CallerLookup,
        DecisionRequest,
        DecisionResult,
        EventPage,
        EventsQuery,
        LogPage,
        LogQuery,
        ModelDelta,
        OperatorResult,
        OperatorResume,
        Permit,
        RunLookup,
        RunRecord,
        RunReply,
        RunRequest,
        RunStatus,
        SequencedEvent,
        ThreadStart,
        ThreadState,
        ThreadView,
    )
    from workflows.questions import Question
    from workflows.sdk.agent import AgentDefinition
    from workflows.subagent_models import SUBAGENT_REPORT, SubagentReport
    from workflows.turn import Turn
    from workflows.view import asked_at, thread_status, thread_view

OPERATOR_RESUME = "operator_resume"
"""The name of the operator's update and signal, as the CLI and the Web UI send them."""
IDENTITY_LOOKUP_TIMEOUT = timedelta(seconds=30)
"""How long the identity lookup may take, retries included (one attempt 10 s): past it
the audit record keeps no identity, and the resume's handler finishes (the thread
continues as new only after it has)."""
IDENTITY_LOOKUP_RETRIES = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)

RUNS_CARRIED = 10
"""Runs (with their events) a thread carries into a new workflow run, so clients can
still re-read or reconnect to its recent runs after a continue-as-new."""
REPLAYED_EVENTS = 1000
"""Under Worker Versioning, the history events a thread's workflow run may reach before
it continues as new at its next rest. A worker that takes up a thread it has not cached
(after a restart, or with more threads in flight than its cache holds) replays the
whole workflow run, every run's agent code again: bounded, however long the thread.
Each continue-as-new writes the carried state twice, so the bound is a trade between
the two (``docs/bench.md``, "Replaying a long thread")."""
TRIM_AT_RUNS = 2 * RUNS_CARRIED
"""Runs a workflow run keeps before it drops all but the last ``RUNS_CARRIED``, as a
continue-as-new would: a thread pinned to its build serves hundreds in one workflow run.
Trimming only now and then keeps its cost (sizing the runs kept) off most runs."""


@workflow.defn
class ThreadWorkflow:
    """One AG-UI thread: its messages, shared state, interrupts, runs and their events.

    The workflow lives as long as the thread. Each AG-UI run is one update, in which the
    agent's ``run`` (new input) or ``resume`` (all answers in) works until it returns.
    Between runs the thread is data only, open interrupts included, so it can continue as
    new with that data, its deadlines unchanged. On an unversioned worker it does so after
    ``start.continue_as_new_after_runs`` runs (by default every run): a waiting thread's
    history then replays no agent code, whatever a deploy changed. Under Worker Versioning
    its workflow run is pinned to its build, which replays it whatever a deploy changed, so
    it continues as new only to move to the deployment's new current build, at its first
    rest after the build changed or after an ``upgrade`` signal, and at its first rest
    past ``REPLAYED_EVENTS`` history events. Either way it also does when Temporal
    suggests it.

    Update:
        run_agent(RunRequest) -> RunReply: executes one run to its terminal event and
            returns the run's events. Its validator enforces the interrupt contract and
            what the agent accepts from clients (``workflows/admission.py``), and
            rejects bad input without touching history.
        run_agent_on_known_state(RunRequest) -> RunReply: ``run_agent`` for a run sent
            without the state the thread has, whose reply carries its state snapshots
            as patches (``workflows/known_state.py``).
        operator_resume(OperatorResume) -> OperatorResult: an operator answers the open
            interrupts; also a signal of the same name.
        decide(DecisionRequest) -> DecisionResult: one approver's decision on an open
            interrupt (``POST /threads/{threadId}/interrupts/{interruptId}/decisions``);
            returns once it is counted, the thread continuing in a run of its own when
            it settled the last open interrupt.
    Signals:
        model_stream(ModelDelta): a model activity's output so far.
        subagent_report(SubagentReport): what a sub-agent run did
            (``workflows/subagent.py``).
        upgrade(): continue as new at the next rest, on the deployment's current build
            (what a deploy sends threads pinned to an older build).
    Queries:
        events(EventsQuery) -> EventPage: a run's events after an offset, which the
            gateway streams while the update is in flight.
        log(LogQuery) -> LogPage: the thread's events after an offset, across runs
            (those clients did not start too), which ``GET /threads/{id}/events`` follows.
        view() -> ThreadView: the thread as ``GET /threads/{thread_id}`` shows it.
        run_record(str) -> RunLookup: the owner and the latest run with a ``runId``,
            which the gateway reconnects a client to.
    """

    @workflow.init
    def __init__(self, start: ThreadStart) -> None:
        self._thread = start.state or ThreadState(
            thread_id=start.thread_id, agent=start.agent, owner=start.owner
        )
        self._log = EventLog(self._thread, clock=workflow.now)
        self._deadlines = Deadlines(
            self._thread, on_expired=self._serve_expiry, on_escalated=self._escalate
        )
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
        self._upgrade = False
        """An ``upgrade`` signal came: continue as new at the next rest."""
        self._cleared = False
        """The search attributes were cleared for a continue-as-new (``_close_run``)."""
        self._published: list[Interrupt] = self._thread.open_interrupts
        """The open interrupts as last written to the memo (a continue-as-new hands the
        new workflow run the memo of the one before)."""
        self._streams = ModelStreams()
        """Who takes a model activity's streamed output."""
        self._fault: ApplicationError | None = None
        """Why the run in progress ends with ``RUN_ERROR`` whatever its turn does next:
        the turn went over a budget (``workflows/budgets.py``)."""
        self._asked_here: list[str] = []
        """The interrupts the run in progress opened."""
        self._event_bytes = 0
        """The size of the events the turn emitted in the run in progress."""
        self._state_digest: tuple[bytes, str | None] | None = None
        """The thread's state as JSON when :meth:`_known_state_json` last digested it,
        and its digest (``known_state.digest``)."""
        self._before: budgets.TurnData | None = None
        """The thread's state and memory as the turn of the run in progress found them
        (its input merged in), for undoing the turn's changes when it went over a
        budget, and the sizes of what the turn may grow; ``None`` until the turn starts."""
        self._permits: list[Permit] = []
        """The permits the run in progress handed the agent's turn."""
        self._operator_signals = 0
        """``operator_resume`` signals this workflow run received: the n-th is the n-th
        of its history, where its sender's identity is (``activities/identity.py``)."""
        self._delegation = Delegation(self._thread, self._emit_own)
        """The thread's sub-agents (``workflows/delegation.py``)."""

    @workflow.run
    async def run(self, start: ThreadStart) -> None:
        """Serve runs as updates until the history is long enough to continue as new."""
        self._deadlines.arm_carried()
        workflow.set_current_details(self._current_details())
        try:
            await workflow.wait_condition(
                lambda: self._should_continue_as_new() and self._between_runs()
            )
            if workflow.cancellation_reason() is not None:
                # Cancelled as its last run ended: the cancel reaches this coroutine only
                # after it ran on, and a continue-as-new would drop it.
                raise asyncio.CancelledError
        except asyncio.CancelledError:
            # Cancelled (``temporal workflow cancel``): its sub-agents go with it.
            await self._delegation.cancel_all()
            raise
        if not self._cleared:
            # Not foreseen when the last run ended (``_close_run``).
            workflow.upsert_search_attributes(visibility.cleared())
        waiting_on = self._thread.open_interrupts
        workflow.continue_as_new(
            ThreadStart(
                thread_id=start.thread_id,
                agent=start.agent,
                owner=start.owner,
                continue_as_new_after_runs=start.continue_as_new_after_runs,
                state=self._log.carried(RUNS_CARRIED),
            ),
            memo=visibility.memo(waiting_on, self._thread.owner, self._asked_at()),
            search_attributes=TypedSearchAttributes(self._search_attributes()),
            initial_versioning_behavior=versioning.next_run_behavior(),
        )

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        if self._upgrade or info.is_continue_as_new_suggested():
            return True
        if versioning.versioned():
            return (
                info.is_target_worker_deployment_version_changed()
                or info.get_current_history_length() >= REPLAYED_EVENTS
            )
        return self._runs_here >= self._continue_after

    def _between_runs(self) -> bool:
        """No run in progress or waiting its turn: the thread is all in ``self._thread``."""
        return (
            self._run is None and not self._run_lock.locked() and workflow.all_handlers_finished()
        )

    @workflow.update
    async def run_agent(self, request: RunRequest) -> RunReply:
        """Execute one AG-UI run and return its events, terminal event last."""
        return await self._run_client(request)

    async def _run_client(self, request: RunRequest) -> RunReply:
        """The body of :meth:`run_agent` and :meth:`run_agent_on_known_state`."""
        async with self._run_lock:
            with _internal_errors():
                # Checked again: the thread may have changed while this run waited its turn.
                self._check_run(request)
                earlier = self._earlier_run(request)
                if earlier is not None:
                    events = self._log.replay(earlier, request.input.run_id)
                    return RunReply(run_key=earlier.key, events=events)
                run = self._open_run(request)
                # Messages the thread drops from now on may be in the sender's prefix.
                dropped = self._thread.messages_dropped
                known = (
                    request.known
                    if request.known and self._log.begins_with(request.known)
                    else None
                )
                # The state the client sent, as JSON, if the request left it out. None
                # too if a run changed it while this one waited: the client's copy is
                # then older than the thread's, which stays.
                state = self._known_state_json(request)
                # Then the log's patches of the run's snapshots start from it, most often.
                logged = state is not None and self._log.last_state() == state
            run_input = request.input
            if state is not None:
                # What the agent sees of the input is what the client sent.
                run_input = run_input.model_copy(update={"state": pydantic_core.from_json(state)})
            await self._serve_run(run, run_input, resume=run_input.resume, take_input=True)
            reply = RunReply(run_key=run.key, events=self._log.events_of(run))
            if known is not None and self._thread.messages_dropped == dropped:
                reply.events = [_without_prefix(item, known.count) for item in reply.events]
                reply.snapshot_prefix = known.count
            if state is not None:
                patches = self._log.state_patches(run) if logged else None
                reply.events, reply.state_patches = known_state.leave_out(
                    reply.events, state, patches
                )
            return reply

    @run_agent.validator
    def _validate_run_agent(self, request: RunRequest) -> None:
        with _internal_errors():
            self._check_run(request)
            if request.known is not None and not self._log.begins_with(request.known):
                raise ApplicationError(
                    "The thread's conversation does not begin with the messages left out.",
                    type=RESEND,
                    non_retryable=True,
                )
            if request.known_state is not None and self._known_state_json(request) is None:
                raise ApplicationError(
                    "The thread's state is not the state left out.", type=RESEND, non_retryable=True
                )

    @workflow.update
    async def run_agent_on_known_state(self, request: RunRequest) -> RunReply:
        """:meth:`run_agent`, for a run sent without its state (``request.known_state``),
        which a build older than this handler must reject rather than run."""
        return await self._run_client(request)

    @run_agent_on_known_state.validator
    def _validate_run_agent_on_known_state(self, request: RunRequest) -> None:
        self._validate_run_agent(request)

    def _known_state_json(self, request: RunRequest) -> bytes | None:
        """The thread's state as JSON (``budgets.to_json``) if ``request`` left out a
        state and the thread's is that one; else ``None``.

        A run's validator and then its handler ask this of the same state, most often:
        its digest, the costlier, is made again only for a state whose JSON changed.
        """
        if request.known_state is None:
            return None
        encoded = budgets.to_json(self._thread.state)
        digested = self._state_digest
        if digested is None or digested[0] != encoded:
            digested = self._state_digest = (encoded, known_state.digest(self._thread.state))
        return encoded if digested[1] == request.known_state else None

    @workflow.signal(name=STREAM_SIGNAL)
    def model_stream(self, delta: ModelDelta) -> None:
        """A model activity's output so far; the run that awaits it streams it on (see
        ``activities.chat.DeltaSender``). Late deltas, of a step already done, are dropped."""
        error = self._streams.deliver(delta)
        if error is not None:
            # Over a budget, most likely (``emit``): the run ends on it once the model's
            # activity returns.
            if not isinstance(error, ApplicationError):
                workflow.logger.error("streamed model output failed", exc_info=error)
            self._fault = self._fault or _as_fault(error)

    @workflow.signal(name=SUBAGENT_REPORT)
    def subagent_report(self, report: SubagentReport) -> None:
        """A sub-agent run's report, for the turn that waits on it (``Delegation``)."""
        self._delegation.receive(report)

    @workflow.signal(name=versioning.UPGRADE_SIGNAL)
    def upgrade(self) -> None:
        """Continue as new at the next rest, on the deployment's current build."""
        self._upgrade = True

    @workflow.query
    def events(self, query: EventsQuery) -> EventPage:
        """A run's events after ``query.after``; empty while the run waits its turn.

        A reader that has the conversation's first messages gets the snapshots without
        them, as the run's reply leaves them out: a snapshot of a long conversation is
        the most of what a page of a run in flight holds, and the reader (the gateway
        streaming the run to the client that sent them) has them already.
        """
        run = self._runs.get(query.run_key)
        if run is None:
            return EventPage(events=[], ended=False)
        page = EventPage(
            events=self._log.events_of(run, after=query.after), ended=run.status != "running"
        )
        known = query.known
        if known is not None and self._log.begins_with(known):
            snapshots = [
                item.event for item in page.events if isinstance(item.event, MessagesSnapshotEvent)
            ]
            if snapshots and all(len(each.messages) >= known.count for each in snapshots):
                page.events = [_without_prefix(item, known.count) for item in page.events]
                page.snapshot_prefix = known.count
        return page

    @workflow.query
    def log(self, query: LogQuery) -> LogPage:
        """The thread's events after ``query.after``, a page at a time, whichever runs
        they belong to."""
        events, more = self._log.page(query.after)
        return LogPage(
            owner=self._thread.owner,
            events=events,
            more=more,
            running=self._run is not None or self._run_lock.locked(),
        )

    @workflow.query
    def view(self) -> ThreadView:
        """The thread's messages, state, open interrupts and runs."""
        return thread_view(self._thread, self._run)

    @workflow.query
    def run_record(self, run_id: str) -> RunLookup:
        """The thread's owner, and the latest run with AG-UI ``runId`` ``run_id`` (a
        resume may reuse one), if any."""
        run = next((run for run in reversed(self._thread.runs) if run.run_id == run_id), None)
        return RunLookup(owner=self._thread.owner, run=run)

    @workflow.update(name=OPERATOR_RESUME)
    async def operator_resume(self, request: OperatorResume) -> OperatorResult:
        """An operator answers the open interrupts (``temporal workflow update``).

        Checked exactly as a client's resume, but not against the interrupts' approver
        policies (break-glass): an invalid one is rejected by the validator, before
        anything is written. Applied in a run of its own, recorded in the audit trail
        with the operator's name (and decided by ``operator:<name>``) and the identity
        Temporal recorded for the caller; the client's next run sees the result.
        """
        update = workflow.current_update_info()
        return await self._operator_resume(request, update_id=update.id if update else None)

    @operator_resume.validator
    def _validate_operator_resume(self, request: OperatorResume) -> None:
        with _internal_errors():
            self._check_operator(request)

    @workflow.signal(name=OPERATOR_RESUME)
    async def operator_resume_signal(self, request: OperatorResume) -> None:
        """The same as a signal, which the Web UI's "Send a Signal" can send. A signal
        cannot answer, so a rejected one is recorded in the audit trail instead."""
        # Counted before any await: handlers start in the order the history has them.
        index = self._operator_signals
        self._operator_signals += 1
        with contextlib.suppress(ApplicationError):
            await self._operator_resume(request, signal_index=index)

    async def _operator_resume(
        self, request: OperatorResume, update_id: str | None = None, signal_index: int = 0
    ) -> OperatorResult:
        """Apply an operator's resume, then add its sender's identity to its audit record
        (the update's when ``update_id`` names one, else the ``signal_index``-th signal's)."""
        recorded: list[AuditRecord] = []
        try:
            return await self._apply_operator_resume(request, recorded)
        finally:
            lookup = CallerLookup(
                workflow_id=workflow.info().workflow_id,
                run_id=workflow.info().run_id,
                update_id=update_id,
                signal_name=None if update_id else OPERATOR_RESUME,
                signal_index=signal_index,
                max_chars=budgets.AUDIT_IDENTITY_CHARS,
            )
            await self._record_identity(recorded, lookup)

    async def _apply_operator_resume(
        self, request: OperatorResume, recorded: list[AuditRecord]
    ) -> OperatorResult:
        async with self._run_lock:
            try:
                with _internal_errors():
                    earlier = self._check_operator(request)
            except ApplicationError as error:
                recorded.append(self._record_audit(request, "rejected", error=error))
                raise
            if earlier is not None:
                # The run may be no longer carried; its key still names it.
                run_id = self._runs[earlier].run_id if earlier in self._runs else earlier
                recorded.append(self._record_audit(request, "repeated", run_id=run_id))
                return OperatorResult(run_id=run_id, outcome="repeated")
            run_id = f"operator-{workflow.uuid4()}"
            recorded.append(self._record_audit(request, "applied", run_id=run_id))
            run = self._start_run(run_id, run_id, None, sent_by=request.operator)
            await self._serve_run(
                run, self._unrequested_input(run), resume=request.resume, operator=request.operator
            )
            return OperatorResult(run_id=run_id, outcome="applied")

    async def _record_identity(self, recorded: list[AuditRecord], lookup: CallerLookup) -> None:
        """Look up who sent the resume ``lookup`` names and add it to its audit records.

        An activity, not a local one: an update's accepted event, which holds its
        sender, is in the history only once the workflow task that accepted it has
        completed. A lookup that fails records no identity: it never holds up the thread
        past ``IDENTITY_LOOKUP_TIMEOUT``, nor changes the resume's result.
        """
        if not recorded:
            return
        try:
            identity = await workflow.execute_activity(
                caller_identity,
                lookup,
                start_to_close_timeout=timedelta(seconds=10),
                schedule_to_close_timeout=IDENTITY_LOOKUP_TIMEOUT,
                retry_policy=IDENTITY_LOOKUP_RETRIES,
            )
        except ActivityError as error:
            workflow.logger.warning("the operator's identity could not be read", exc_info=error)
            return
        for record in recorded:
            record.identity = identity

    def _check_operator(self, request: OperatorResume) -> str | None:
        """Reject an operator's resume the thread must not apply; the key of the run
        that already applied exactly this resume, if it is a repeat."""
        if not request.resume:
            raise rejection(ErrorCode.EMPTY_RESUME, "operator_resume needs resume entries.")
        budgets.check_resume_size(request.resume)
        served.check_served(workflow.info().task_queue, self._thread.agent)
        run_key = is_replay(request.resume, self._thread.applied)
        if run_key is not None:
            return run_key
        check_resume(
            self._thread.open_interrupts, request.resume, self._thread.applied, workflow.now()
        )
        return None

    def _record_audit(
        self,
        request: OperatorResume,
        outcome: AuditOutcome,
        run_id: str | None = None,
        error: ApplicationError | None = None,
    ) -> AuditRecord:
        record = audit.operator_resume(request, outcome, workflow.now(), run_id, error)
        audit.append(self._thread.audit, record)
        return record

    def _audit_decision(
        self, principal: str, entry: ResumeEntry, ballot: Ballot, run_id: str | None
    ) -> None:
        record = audit.decision(principal, entry, ballot, workflow.now(), run_id)
        audit.append(self._thread.audit, record)

    def _audit_permit(self, permit: Permit, run_id: str | None) -> None:
        audit.append(self._thread.audit, audit.permit(permit, run_id))

    @workflow.update
    async def decide(self, request: DecisionRequest) -> DecisionResult:
        """Count one principal's decision on an open interrupt (n-of-m, by the rule in
        ``workflows/approvers.py``).

        Checked like a resume's entry, and against the interrupt's approvers
        (``workflows/decisions.py``): a decision that may not count is rejected by the
        validator, so it leaves no history. Returns as soon as the decision is
        recorded, without waiting for the agent: when it settles the thread's last open
        interrupt, the agent continues in a run of its own (``runId`` in the result),
        which holds the run lock until it ends, so later runs, decisions and the
        continue-as-new wait for it.
        """
        await self._run_lock.acquire()
        run: RunRecord | None = None
        try:
            with _internal_errors():
                checked = self._check_decision(request)
                result, run = self._count(request, checked)
        finally:
            if run is None:
                self._run_lock.release()
        if run is not None:
            asyncio.create_task(self._continue(run))
        return result

    @decide.validator
    def _validate_decide(self, request: DecisionRequest) -> None:
        with _internal_errors():
            self._check_decision(request)

    def _check_decision(self, request: DecisionRequest) -> Decision | AppliedAnswer:
        agent = served.find(workflow.info().task_queue, self._thread.agent)
        if agent is None:
            raise served.not_served(self._thread.agent)
        return check_decision(self._thread, request, agent, workflow.now())

    def _count(
        self, request: DecisionRequest, checked: Decision | AppliedAnswer
    ) -> tuple[DecisionResult, RunRecord | None]:
        """Count a checked decision; the result, and the run the thread continues in when
        it settled the last open interrupt (opened, not yet served)."""
        if isinstance(checked, AppliedAnswer):
            return self._repeated(request, checked), None
        interrupt_id = checked.interrupt.id
        ballot = checked.ballot
        tally = count(
            checked.view, ballot.answer_key, request.principal, checked.key, checked.approval
        )
        view = tally.view
        result = DecisionResult(
            outcome=tally.verdict,
            interrupt_id=interrupt_id,
            received=view.received,
            needed=view.needed,
        )
        if tally.verdict == "repeated":
            return result, None
        audit.supersede(self._thread.audit, interrupt_id, tally.superseded)
        if checked.approval:
            ballot.answer_key = checked.key
        self._thread.ballots[interrupt_id] = ballot
        interrupt = self._show(interrupt_id, view)
        if tally.verdict == "pending":
            self._audit_decision(request.principal, checked.entry, ballot, None)
            self._publish_status()
            return result, None
        entry = checked.entry
        decided_by = list(view.approved_by) if checked.approval else [request.principal]
        last = len(self._thread.open_interrupts) == 1
        # A run's key, or (others still open) one no run has, for the ledger.
        run_id = f"decision-{workflow.uuid4()}"
        self._audit_decision(request.principal, entry, ballot, run_id if last else None)
        permit = permit_for(interrupt, ballot, entry, decided_by, workflow.now())
        answer = Answer(
            interrupt=interrupt,
            status=entry.status,
            payload=entry.payload,
            decided_by=decided_by,
            permit=permit,
        )
        self._close_interrupt(interrupt, answer, key=checked.key, run_key=run_id)
        if permit is not None:
            self._audit_permit(permit, run_id if last else None)
        result = result.model_copy(
            update={
                "status": entry.status,
                "approved": approved(entry.payload) if entry.status == "resolved" else None,
                "decided_by": decided_by,
                "run_id": run_id if last else None,
            }
        )
        if not last:
            self._publish_status()
            return result, None
        return result, self._start_run(run_id, run_id, None, sent_by=request.principal)

    def _repeated(self, request: DecisionRequest, done: AppliedAnswer) -> DecisionResult:
        """The result of a decision that repeats one that settled its interrupt."""
        run = self._runs.get(done.run_key)
        entry = request.entry
        return DecisionResult(
            outcome="repeated",
            interrupt_id=done.interrupt_id,
            status=done.status,
            approved=approved(entry.payload) if entry.status == "resolved" else None,
            decided_by=done.decided_by,
            run_id=run.run_id if run is not None else None,
        )

    def _show(self, interrupt_id: str, view: ApproversView) -> Interrupt:
        """Show ``view`` as the interrupt's approvers; the interrupt as now shown.

        A copy replaces it: the events of the runs that announced it hold the old one,
        whose ``RUN_FINISHED`` must read as it was sent.
        """
        asked = self._thread.asked
        index = next(i for i, interrupt in enumerate(asked) if interrupt.id == interrupt_id)
        shown = asked[index].model_copy(update={"metadata": with_view(asked[index].metadata, view)})
        asked[index] = shown
        return shown

    async def _continue(self, run: RunRecord) -> None:
        """Serve the run a decision opened (its answers closed already), then release the
        run lock its handler acquired."""
        try:
            await self._serve_run(run, self._unrequested_input(run), settled=True)
        finally:
            self._run_lock.release()

    def _escalate(self, interrupt_id: str) -> Interrupt | None:
        """Mark the open interrupt as escalated (its escalation is due) and publish it
        (``Deadlines``); the interrupt, if its escalation notice is due."""
        ballot = self._thread.ballots.get(interrupt_id)
        interrupt = next((i for i in self._thread.open_interrupts if i.id == interrupt_id), None)
        view = ApproversView.of(interrupt.metadata) if interrupt is not None else None
        if ballot is None or view is None or view.escalation is None:
            return None
        escalation = view.escalation
        if not escalation.escalated:
            escalated = escalation.model_copy(update={"escalated": True})
            ballot.notice_due = True
            shown = self._show(interrupt_id, view.model_copy(update={"escalation": escalated}))
            self._publish_status()
            return shown
        return interrupt if ballot.notice_due else None

    async def _serve_expiry(self, interrupt: Interrupt) -> None:
        """Close ``interrupt`` as expired, its deadline having passed (``Deadlines``).

        When that closes the thread's last open interrupt, the agent resumes at once (it
        sees the answer ``expired``) in a run of its own, so the thread accepts new input
        again without anyone having to come back.
        """
        async with self._run_lock:
            # Answered, maybe, while the expiry waited its turn.
            if all(i.id != interrupt.id for i in self._thread.open_interrupts):
                return
            run = self._open_expiry_run()
            await self._serve_run(run, self._unrequested_input(run), expired=interrupt)

    def _check_run(self, request: RunRequest) -> None:
        """Reject a run this thread must not execute; changes nothing."""
        agent = served.find(workflow.info().task_queue, self._thread.agent)
        repeat = self._earlier_run(request) is not None
        check_run(
            self._thread, request, agent, workflow.now(), repeat=repeat, knows=self._log.knows
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

    async def _serve_run(
        self,
        run: RunRecord,
        run_input: RunAgentInput,
        resume: list[ResumeEntry] | None = None,
        expired: Interrupt | None = None,
        take_input: bool = False,
        operator: str | None = None,
        settled: bool = False,
    ) -> None:
        """Let the agent work in ``run``, just opened, then end it.

        Every run goes this one way, a client's, an operator's, an expiry's or a
        decision's: its answers close interrupts (the entries of a ``resume``, or an
        ``expired`` interrupt; a decision closed its own before), and once none is open
        the agent's ``resume`` takes them all. A run with no answers is a new turn of
        the agent's ``run``.

        Whatever goes wrong in here ends the run with ``RUN_ERROR``: an exception that
        escaped would fail the workflow task, which Temporal retries forever, the thread
        stuck and every later run answered with an error.

        Args:
            run: The run, opened under the run lock, which the caller holds.
            run_input: What the agent's step sees as the run's input.
            resume: The answers a client or an operator sent.
            expired: The interrupt whose deadline passed.
            take_input: Add the input's messages and state to the thread (a client's run).
            operator: Whose ``resume`` it is, when an operator's (not the owner's).
            settled: A decision settled the thread's last open interrupt.
        """
        try:
            if take_input:
                self._take_input(run_input)
            self._before = budgets.turn_data(self._thread)
            await self._work(run, run_input, resume, expired, operator, settled)
        except Exception as error:
            if isinstance(error, TemporalError) and not isinstance(error, FailureError):
                raise  # Temporal's own (nondeterminism): the workflow task must fail.
            await self._abort(run, error)
        await self._delegation.reap()

    async def _work(
        self,
        run: RunRecord,
        run_input: RunAgentInput,
        resume: list[ResumeEntry] | None,
        expired: Interrupt | None,
        operator: str | None,
        settled: bool,
    ) -> None:
        """The body of :meth:`_serve_run`."""
        if resume or settled or expired is not None:
            # The tool calls being answered (or expired) were announced in an earlier
            # run; the snapshot puts them in this run's view so its TOOL_CALL_RESULTs
            # resolve.
            self._emit_messages_snapshot()
        if resume:
            self._apply_resume(resume, run, operator)
        if expired is not None:
            self._close_interrupt(
                expired,
                Answer(interrupt=expired, status="expired"),
                key=f"expired:{expired.id}",
                run_key=run.key,
            )
        if resume or expired is not None or settled:
            self._resume_if_answered(run_input)
        else:
            agent = self._agent()
            self._start_turn(agent.run, run_input)
        await self._finish_run(run)

    def _agent(self) -> AgentDefinition:
        return served.agent(workflow.info().task_queue, self._thread.agent)

    def _start_turn(
        self, step: Callable[[Turn], Coroutine[Any, Any, None]], run_input: RunAgentInput
    ) -> None:
        """Run one step of the agent (``run`` or a ``resume``) as the run's work."""
        self._turn = asyncio.create_task(step(Turn(run_input, self._thread, self)))

    def ask(
        self,
        questions: Sequence[Question],
        subagent_run_id: str | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Interrupt]:
        """Open interrupts for ``questions`` (``TurnHost``): the run ends on them once
        the agent's step returns; their deadlines and reminders are timed from now.

        Questions over a budget (too many in the run, expiring too far ahead, ...) open
        nothing: the run ends with ``RUN_ERROR`` and withdraws what it opened before.
        """
        thread = self._thread
        now = workflow.now()
        default = self._agent().remind_before
        with self._faults():
            budgets.check_questions(questions, len(self._asked_here), default, now)
        # workflow.uuid4() replays to the same ids.
        ids = ids or [f"int-{workflow.uuid4()}" for _ in questions]
        interrupts, reminders = [], []
        for question, interrupt_id in zip(questions, ids, strict=True):
            # Who may answer, as clients see it: the owner, unless the agent said.
            view = (question.approvers or OWNER_DECIDES).view(thread.owner, now)
            shown = question.model_copy(update={"metadata": with_view(question.metadata, view)})
            interrupt = shown.interrupt(interrupt_id)
            if subagent_run_id is not None:
                interrupt.subagent_run_id = subagent_run_id
            interrupts.append(interrupt)
            thread.ballots[interrupt.id] = Ballot(asked_at=now, call=question.call)
            reminders += question.reminders(interrupt.id, default, now)
        thread.asked.extend(interrupts)
        self._asked_here += [interrupt.id for interrupt in interrupts]
        if subagent_run_id is not None:
            self._delegation.asked(subagent_run_id, list(ids))
        for interrupt in interrupts:
            self._deadlines.arm_expiry(interrupt)
            self._deadlines.arm_escalation(interrupt)
            metrics.interrupt_opened(thread.agent, interrupt)
        reminders.sort(key=lambda reminder: reminder.at)
        thread.reminders.extend(reminders)
        for reminder in reminders:
            self._deadlines.arm_reminder(reminder)
        return interrupts

    def listen(self, activity_id: str, listener: Callable[[ModelDelta], None] | None) -> None:
        """Route a model activity's streamed output (``TurnHost``; ``None``: stop)."""
        self._streams.listen(activity_id, listener)

    @property
    def subagents(self) -> Delegation:
        """The thread's sub-agents (``TurnHost``)."""
        return self._delegation

    def _resume_if_answered(self, run_input: RunAgentInput) -> None:
        """Once no asked interrupt is open, hand every answer to the agent's ``resume``."""
        thread = self._thread
        if not thread.asked or thread.open_interrupts:
            return
        answers = [thread.answers[interrupt.id] for interrupt in thread.asked]
        thread.asked, thread.answers = [], {}
        self._permits = [answer.permit for answer in answers if answer.permit is not None]
        agent = self._agent()
        self._start_turn(lambda turn: agent.resume(turn, answers), run_input)

    def _apply_resume(
        self, resume: list[ResumeEntry], run: RunRecord, operator: str | None
    ) -> None:
        """Close the interrupts ``resume`` answers, each decided by its sender (the
        owner, or ``operator:<name>``), with a permit for an approved tool call.

        The owner's entries are audited as decisions; an operator's resume has its own
        audit record already.
        """
        thread = self._thread
        now = workflow.now()
        decider = f"operator:{operator}" if operator is not None else run.sent_by or thread.owner
        open_by_id = {interrupt.id: interrupt for interrupt in thread.open_interrupts}
        for entry in resume:
            interrupt = open_by_id.get(entry.interrupt_id)
            if interrupt is None:
                # Closed already: a cancel of an expired interrupt, or the replay of a
                # resume whose run is no longer carried (contract rule 5).
                continue
            ballot = ballot_of(thread, interrupt, now)
            permit = permit_for(interrupt, ballot, entry, [decider], now)
            if operator is None:
                self._audit_decision(decider, entry, ballot, run.run_id)
            self._close_interrupt(
                interrupt,
                Answer(
                    interrupt=interrupt,
                    status=entry.status,
                    payload=entry.payload,
                    decided_by=[decider],
                    permit=permit,
                ),
                key=answer_key(entry),
                run_key=run.key,
            )
            if permit is not None:
                self._audit_permit(permit, run.run_id)

    def _close_interrupt(
        self, interrupt: Interrupt, answer: Answer, key: str, run_key: str
    ) -> None:
        thread = self._thread
        thread.answers[interrupt.id] = answer
        metrics.interrupt_closed(thread.agent, interrupt, answer.status)
        # Its reminders and escalation are moot now (their tasks see that and end).
        thread.reminders = [r for r in thread.reminders if r.interrupt_id != interrupt.id]
        thread.ballots.pop(interrupt.id, None)
        thread.applied[interrupt.id] = AppliedAnswer(
            interrupt_id=interrupt.id,
            status=answer.status,
            key=key,
            run_key=run_key,
            expires_at=interrupt.expires_at,
            decided_by=answer.decided_by,
        )
        for oldest in list(thread.applied)[: max(len(thread.applied) - budgets.APPLIED_KEPT, 0)]:
            del thread.applied[oldest]

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
        error = None
        if turn is not None:
            await workflow.wait_condition(turn.done)
            self._turn = None
            error = turn.exception()
        if self._fault is None:
            # Even after an error: what the turn left is kept, so it must fit.
            with contextlib.suppress(ApplicationError), self._faults():
                assert self._before is not None, "a turn's data is kept as it starts"
                after = budgets.turn_data(self._thread).sizes
                budgets.check_turn_data(self._before.sizes, after)
        if self._fault is not None:
            self._undo_turn()
            self._fail_run(run, self._fault.type or ErrorCode.INTERNAL, self._fault.message)
            return
        if error is not None:
            code, message = failure(error)
            if code == ErrorCode.PERMIT_MISMATCH:
                record = audit.refused_permit(self._permits, message, workflow.now(), run.run_id)
                audit.append(self._thread.audit, record)
            self._withdraw_questions()
            self._fail_run(run, code, message)
            return
        self._emit_own(StateSnapshotEvent(snapshot=self._thread.state))
        self._emit_messages_snapshot()
        waiting_on = self._thread.open_interrupts
        self._delegation.end_run(interrupted=bool(waiting_on))
        outcome = (
            RunFinishedInterruptOutcome(interrupts=waiting_on)
            if waiting_on
            else RunFinishedSuccessOutcome()
        )
        self._emit_own(
            RunFinishedEvent(thread_id=self._thread.thread_id, run_id=run.run_id, outcome=outcome)
        )
        self._close_run(run, "interrupted" if waiting_on else "succeeded")

    def _fail_run(self, run: RunRecord, code: str, message: str) -> None:
        """End ``run`` with ``RUN_ERROR``, after the conversation as the thread has it:
        a client that resends its own copy must not resend what the failed turn streamed
        but never added (a new assistant message is not a client's to write)."""
        self._emit_messages_snapshot()
        self._delegation.end_run(interrupted=False)
        self._emit_own(RunErrorEvent(message=message, code=code))
        self._close_run(run, "failed")

    async def _abort(self, run: RunRecord, error: Exception) -> None:
        """End ``run``, which the thread's own code failed to serve, with ``RUN_ERROR``
        (``INTERNAL``); the thread stays as the run's last complete step left it."""
        workflow.logger.error("the thread failed to serve a run", exc_info=error)
        turn = self._turn
        if turn is not None:
            turn.cancel()
            await workflow.wait_condition(turn.done)
            self._turn = None
        if self._run is run:
            self._fault = self._fault or _as_fault(error)
            self._undo_turn()
            self._fail_run(run, self._fault.type or ErrorCode.INTERNAL, self._fault.message)

    @contextlib.contextmanager
    def _faults(self) -> Iterator[None]:
        """Record an ``ApplicationError`` raised inside as the run's fault (the first one
        stands), then let it propagate to the agent's code that caused it."""
        try:
            yield
        except ApplicationError as error:
            self._fault = self._fault or error
            raise

    def _undo_turn(self) -> None:
        """Undo what the run's turn did to the thread's interrupts and data, for a run
        that ends on its fault: its questions withdrawn, state and memory as the run
        found them (as it found them when its turn started, if it did)."""
        self._withdraw_questions()
        if self._before is not None:
            self._thread.state = pydantic_core.from_json(self._before.state)
            self._thread.memory = pydantic_core.from_json(self._before.memory)

    def _withdraw_questions(self) -> None:
        """Withdraw the interrupts the run opened (with their reminders) and forget the
        paused turn, for a run that ends with ``RUN_ERROR``: only ``RUN_FINISHED``
        announces interrupts, so a client never learns of these, and a resume would
        continue a turn that failed (one whose sub-agent failed waits forever for it).
        The sub-agent runs that asked them are cancelled after the run
        (``Delegation.reap``)."""
        thread = self._thread
        withdrawn = [i for i in thread.open_interrupts if i.id in self._asked_here]
        for interrupt in withdrawn:
            metrics.interrupt_closed(thread.agent, interrupt, "withdrawn")
        gone = {interrupt.id for interrupt in withdrawn}
        thread.asked = [i for i in thread.asked if i.id not in gone]
        thread.reminders = [r for r in thread.reminders if r.interrupt_id not in gone]
        for interrupt_id in gone:
            thread.ballots.pop(interrupt_id, None)
        if not thread.open_interrupts:
            thread.asked, thread.answers = [], {}
            thread.journal.scopes.clear()

    def _take_input(self, run_input: RunAgentInput) -> None:
        """Take in a client's run's new messages and state (checked by ``_check_run``)."""
        for message in run_input.messages:
            if not self._log.knows(message.id):
                self._log.add_message(message, budgets.to_json(message))
        if run_input.state:
            self._thread.state.update(run_input.state)

    def _open_run(self, request: RunRequest) -> RunRecord:
        """Record the run and emit ``RUN_STARTED``; :meth:`_serve_run` takes its input in."""
        update = workflow.current_update_info()
        assert update is not None, "client runs only open inside the run_agent update"
        return self._start_run(
            update.id,
            request.input.run_id,
            request.input.parent_run_id,
            sent_by=request.principal,
        )

    def _open_expiry_run(self) -> RunRecord:
        """A run no client asked for: the agent continuing after an interrupt expired."""
        run_id = f"expiry-{workflow.uuid4()}"
        return self._start_run(run_id, run_id, None)

    def _start_run(
        self, key: str, run_id: str, parent_run_id: str | None, sent_by: str | None = None
    ) -> RunRecord:
        run = RunRecord(
            key=key,
            run_id=run_id,
            started_at=workflow.now(),
            first_seq=self._log.next_seq(),
            sent_by=sent_by,
        )
        self._thread.runs.append(run)
        self._runs[key] = run
        self._runs_here += 1
        self._run = run
        self._fault, self._asked_here, self._event_bytes, self._permits = None, [], 0, []
        self._before = None
        self._delegation.new_run()
        workflow.logger.info("run started", extra={"run_id": run_id})
        self._emit_own(
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
        if self._should_continue_as_new():
            # The next workflow run gets the thread's attributes and memo with the
            # continue-as-new; this one's are cleared, so operators' queries find only
            # the live run of each thread.
            workflow.upsert_search_attributes(visibility.cleared())
            self._cleared = True
            workflow.set_current_details(self._current_details())
        else:
            self._publish_status()
        if len(self._thread.runs) >= TRIM_AT_RUNS:
            self._log.trim(RUNS_CARRIED)
            self._runs = {run.key: run for run in self._thread.runs}

    def add_message(self, message: Message) -> None:
        """Add a message to the conversation unless it is there already (``TurnHost``).

        Clients resend the whole conversation on each run, the agent's own replies
        included, so a message id the thread knows is skipped. A message over its budget
        is refused: the run ends with ``OUTPUT_TOO_LARGE``.
        """
        if self._log.knows(message.id):
            return
        encoded = budgets.to_json(message)
        with self._faults():
            budgets.check_message(len(encoded))
        self._log.add_message(message, encoded)

    def emit(self, event: Event) -> None:
        """Append ``event`` to the log of the run in progress (``TurnHost``), within the
        run's budget of agent events; past it the run ends with ``OUTPUT_TOO_LARGE``."""
        assert self._run is not None, "agent code emits only while a run is in progress"
        with self._faults():
            if self._fault is not None:
                raise self._fault
            self._event_bytes += budgets.json_size(event)
            budgets.check_run_events(self._event_bytes)
        self._log.append(self._run, event)

    def _emit_own(self, event: Event) -> None:
        """Append one of the thread's own events (a run's start, end or snapshots)."""
        assert self._run is not None, "the thread emits only while a run is in progress"
        self._log.append(self._run, event)

    def _emit_messages_snapshot(self) -> None:
        """Emit the whole conversation, logged by its length (see ``LoggedEvent``)."""
        assert self._run is not None, "the thread emits only while a run is in progress"
        self._log.append_messages_snapshot(self._run)

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
        workflow.upsert_search_attributes(visibility.updates(self._search_attributes(), settled))
        self._cleared = False
        waiting_on = self._thread.open_interrupts
        if settled and waiting_on != self._published:
            workflow.upsert_memo(visibility.memo(waiting_on, self._thread.owner, self._asked_at()))
            self._published = list(waiting_on)
        # Not in history: the UI reads it by query.
        workflow.set_current_details(self._current_details())

    def _asked_at(self) -> datetime | None:
        """When the open interrupts were asked: the end of the last run that paused."""
        return asked_at(self._thread.runs)

    def _search_attributes(self) -> list[SearchAttributePair[Any]]:
        settled = self._run is None
        return visibility.attributes(
            self._thread.agent,
            self._thread.owner,
            thread_status(self._thread, self._run),
            workflow.now(),
            self._thread.open_interrupts if settled else None,
        )

    def _current_details(self) -> str:
        return current_details(self._run, self._thread.open_interrupts, self._thread.messages)


def _without_prefix(item: SequencedEvent, count: int) -> SequencedEvent:
    """``item``, a ``MESSAGES_SNAPSHOT`` without its first ``count`` messages."""
    event = item.event
    if not isinstance(event, MessagesSnapshotEvent):
        return item
    return item.model_copy(
        update={"event": event.model_copy(update={"messages": event.messages[count:]})}
    )


def _as_fault(error: Exception) -> ApplicationError:
    """``error`` as a run's fault: itself if it is one, else ``INTERNAL``."""
    if isinstance(error, ApplicationError) and error.type in RUN_FAULTS:
        return error
    return ApplicationError(
        "The thread failed to serve this run (see the worker's log); the thread is usable.",
        type=ErrorCode.INTERNAL.value,
        non_retryable=True,
    )


@contextlib.contextmanager
def _internal_errors() -> Iterator[None]:
    """Turn an exception other than an ``ApplicationError`` raised inside into one
    (``INTERNAL``), so that a handler fails its update instead of the workflow task."""
    try:
        yield
    except ApplicationError:
        raise
    except Exception as error:
        if isinstance(error, TemporalError) and not isinstance(error, FailureError):
            raise
        workflow.logger.error("the thread failed to check a run", exc_info=error)
        raise _as_fault(error) from error
