"""The pydantic models that cross the thread workflow's boundary.

Everything here travels through Temporal's pydantic data converter as camelCase JSON,
so fields may be added (with defaults) without breaking recorded histories.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from ag_ui.core import Event, Interrupt, Message, ResumeEntry, RunAgentInput
from pydantic import Field

from workflows.approvers import Ballot
from workflows.wire import Model as Model
from workflows.wire import QueryAnswer

RunStatus = Literal["running", "succeeded", "interrupted", "failed"]
ThreadStatus = Literal["idle", "running", "waiting"]


class RunRecord(Model):
    """One AG-UI run on the thread, as the thread remembers it."""

    key: str
    """The run's identity inside the thread: the id of the workflow update that carried
    it. A client may reuse a ``runId`` (CopilotKit does for resumes), so ``runId`` alone
    cannot name a run."""
    run_id: str
    status: RunStatus = "running"
    started_at: datetime
    finished_at: datetime | None = None
    first_seq: int
    """Sequence number of the run's first event."""
    last_seq: int = 0
    """Sequence number of the run's last event so far."""
    sent_by: str | None = None
    """Who sent it: the principal of a client's run, the operator of an operator's;
    ``None`` for a run the thread started itself (an expiry)."""


class SequencedEvent(Model):
    """An AG-UI event with its position in the thread's event log."""

    seq: int
    run_key: str
    event: Event


def _unset(value: object) -> bool:
    return value is None


class LoggedEvent(SequencedEvent):
    """An event as the thread's log keeps it.

    A ``MESSAGES_SNAPSHOT`` of the whole conversation is kept without its messages, as
    the length of the conversation then (``messages_upto``, counting the messages the
    thread has dropped since, see ``ThreadState.messages_dropped``): the conversation
    only grows at its end, so that prefix, less what was dropped, is the snapshot. Each
    run's snapshots would otherwise copy the conversation into the log, which
    continue-as-new carries.

    A ``STATE_SNAPSHOT`` is kept, but for the oldest one of the log, without its
    snapshot, as the JSON Patch (RFC 6902) that makes it from the log's previous
    ``STATE_SNAPSHOT`` (``state_patch``): each run ends with one of the whole state,
    which mostly repeats the one before.

    Both are left out of the JSON when unset, as they are on most events.
    """

    messages_upto: int | None = Field(default=None, exclude_if=_unset)
    state_patch: list[dict[str, Any]] | None = Field(default=None, exclude_if=_unset)


class Permit(Model):
    """What an approved tool call runs under: the exact arguments, by digest, and who
    approved them. The tool's activity recomputes the digest and refuses to run on
    any other arguments."""

    interrupt_id: str
    tool_call_id: str
    digest: str
    """``workflows.approvers.arguments_digest`` of the arguments approved: the
    ``editedArgs``, or the call's own."""
    approvers: list[str]
    at: datetime


AnswerStatus = Literal["resolved", "cancelled", "expired"]


class Answer(Model):
    """What agent code receives for one interrupt: the interrupt and how it was closed."""

    interrupt: Interrupt
    status: AnswerStatus
    payload: Any = None
    decided_by: list[str] = Field(default_factory=list)
    """Who settled it: the principals whose decisions counted (an operator's resume:
    ``operator:<name>``); empty for an expiry."""
    permit: Permit | None = None
    """For an approved tool call (``Ask.call``): what it may run with."""

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"


class AppliedAnswer(Model):
    """An interrupt's answer as applied: the ledger that makes resumes idempotent."""

    interrupt_id: str
    status: AnswerStatus
    key: str
    """``(interruptId, status, payload)`` canonicalised and digested (see
    ``interrupts.answer_key``)."""
    run_key: str
    """The run that applied it (for a decision that settled it while other interrupts
    stayed open, a key no run has)."""
    expires_at: str | None = None
    decided_by: list[str] = Field(default_factory=list)
    """Whose decisions settled it (``Answer.decided_by``): one of them deciding the same
    again is told it is a repeat."""


class Reminder(Model):
    """A reminder due before an open interrupt's deadline (see ``ThreadWorkflow``)."""

    interrupt_id: str
    at: datetime


class OperatorResume(Model):
    """The ``operator_resume`` message: an operator answers the thread's open interrupts
    from the Temporal Web UI or CLI, as a client's resume would."""

    resume: list[ResumeEntry]
    operator: str = Field(min_length=1)
    """Who: recorded in the thread's audit trail."""


class OperatorResult(Model):
    """What ``operator_resume`` (as an update) returns."""

    run_id: str
    """The run that applied the answers (an earlier one for a repeat)."""
    outcome: Literal["applied", "repeated"]


AuditKind = Literal["operator_resume", "decision", "permit"]
AuditOutcome = Literal["applied", "repeated", "rejected", "superseded"]


class AuditRecord(Model):
    """One entry of the thread's audit trail: an ``operator_resume`` (applied, repeated
    or rejected), a decision that counted (``applied``; ``superseded`` once an approval
    of other arguments restarted the count), or a permit issued to an approved tool
    call (``applied``) or refused by the tool (``rejected``, with the error code).

    Rejected decision requests leave no record: the thread's validator rejects them
    before anything is written, so a caller who may not decide cannot grow the trail.
    """

    at: datetime
    kind: AuditKind = "operator_resume"
    operator: str | None = None
    """The operator, for an ``operator_resume``: the name they gave."""
    identity: str | None = None
    """For an ``operator_resume``: who Temporal says sent it (the ``temporal`` CLI's
    ``temporal-cli:<user>@<host>``, a client's ``identity``, the Web UI's user); unknown
    for a resume recorded before the engine looked it up, or when it could not."""
    resume: list[ResumeEntry] = Field(default_factory=list)
    """The operator's entries, for an ``operator_resume``."""
    outcome: AuditOutcome
    run_id: str | None = None
    """The run that applied it, if one did (a decision that settled the thread's last
    open interrupt: the run it continued in)."""
    error_code: str | None = None
    error: str | None = None
    principal: str | None = None
    """Who decided, for a decision."""
    interrupt_id: str | None = None
    status: AnswerStatus | None = None
    """A decision's ``resolved`` or ``cancelled``."""
    approved: bool | None = None
    """A decision's payload's ``approved``, when it has one."""
    digest: str | None = None
    """The arguments approved (``approvers.arguments_digest``): a permit's, or those a
    tool call's approval is for."""
    approvers: list[str] = Field(default_factory=list)
    """Who approved, for a permit."""


class JournalStep(Model):
    """One step an agent turn took: what it was and what came of it (``workflows/sdk``)."""

    kind: str
    value: Any = None
    """The step's result (a model reply, a tool's outcome, a finished scope's value)."""
    interrupt_ids: list[str] = Field(default_factory=list)
    """For an ``interrupts`` step: the interrupts it opened, in order."""
    answers: list[Answer] | None = None
    """For an ``interrupts`` step: their answers, once every one is in."""


class Journal(Model):
    """The steps of a paused agent turn, by scope: what lets the turn run again from the
    top without repeating any of them (see ``workflows/sdk/journal.py``)."""

    scopes: dict[str, list[JournalStep]] = Field(default_factory=dict)


SubagentStatus = Literal["running", "waiting", "succeeded", "failed", "cancelled"]


class SubagentRecord(Model):
    """A sub-agent run of the thread: a child workflow (``workflows/subagent.py``)."""

    subagent_run_id: str
    """Its ``subagentRunId`` on the wire, which is also its child workflow's id."""
    agent: str
    status: SubagentStatus = "running"
    started_at: datetime
    finished_at: datetime | None = None


class ThreadState(Model):
    """All mutable state of a thread: the one object continue-as-new carries."""

    thread_id: str
    agent: str
    owner: str
    """The principal whose run started the thread: the only one who may run on it."""
    messages: list[Message] = Field(default_factory=list)
    """The conversation, oldest first; past its budget (``budgets.KEPT_MESSAGES_BYTES``)
    the oldest messages are dropped."""
    messages_dropped: int = 0
    """How many messages were dropped from the front of ``messages`` so far."""
    dropped_message_ids: list[str] = Field(default_factory=list)
    """Digests of the newest dropped messages' ids (``budgets.id_digest``), so a client
    that resends one does not add it again."""
    state: dict[str, Any] = Field(default_factory=dict)
    asked: list[Interrupt] = Field(default_factory=list)
    """The interrupts the paused agent turn asked, in the order it asked them; those
    without an answer are the thread's open interrupts."""
    answers: dict[str, Answer] = Field(default_factory=dict)
    """Answers to ``asked`` so far, by interrupt id. When the last one arrives the
    agent's ``resume`` takes them all and both are cleared."""

    @property
    def open_interrupts(self) -> list[Interrupt]:
        """The interrupts a resume must answer, in the order they were asked."""
        return [interrupt for interrupt in self.asked if interrupt.id not in self.answers]

    reminders: list[Reminder] = Field(default_factory=list)
    """Reminders not yet delivered, of open interrupts."""
    ballots: dict[str, Ballot] = Field(default_factory=dict)
    """Who may decide each open interrupt, and the approvals counted so far, by
    interrupt id; an interrupt's goes when it closes (or is withdrawn)."""
    applied: dict[str, AppliedAnswer] = Field(default_factory=dict)
    """The answers applied, by interrupt id, oldest first; the newest
    ``budgets.APPLIED_KEPT`` are kept."""
    runs: list[RunRecord] = Field(default_factory=list)
    events: list[LoggedEvent] = Field(default_factory=list)
    audit: list[AuditRecord] = Field(default_factory=list)
    """What operators and approvers did to the thread and the permits it issued, oldest
    first; the newest ``budgets.AUDIT_KEPT`` (within ``budgets.AUDIT_KEPT_BYTES``) are
    kept."""
    memory: dict[str, Any] = Field(default_factory=dict)
    """What the agent remembers for this thread (e.g. tools the user trusts); unlike
    ``state`` it is not shared with the client."""
    journal: Journal = Field(default_factory=Journal)
    """The agent turn paused on interrupts, for agents built with ``workflows.sdk``."""
    subagents: list[SubagentRecord] = Field(default_factory=list)
    """The sub-agent runs the thread's turns started (child workflows), oldest first; the
    live ones and the newest ``budgets.SUBAGENTS_KEPT`` ended ones are kept."""


class ThreadStart(Model):
    """The thread workflow's input."""

    thread_id: str
    agent: str
    owner: str
    """The principal starting the thread (see ``ThreadState.owner``)."""
    continue_as_new_after_runs: int
    """Runs one workflow run serves on an unversioned worker before the thread continues
    as new (the gateway sets it from ``AGUI_CONTINUE_AS_NEW_AFTER_RUNS`` at the thread's
    first run)."""
    state: ThreadState | None = None
    """Carried state when the thread continues as new; ``None`` for a new thread."""


class KnownMessages(Model):
    """The first messages of a run's conversation, which the sender left out of its
    ``input.messages`` because the thread has them (``workflows.known_messages``)."""

    count: int = Field(ge=1)
    digest: str
    """``known_messages.prefix_digest`` of those messages."""


class RunRequest(Model):
    """The ``run`` update's argument: one AG-UI run for the thread's agent."""

    agent: str
    input: RunAgentInput
    """The run's input; its ``messages`` without the ``known`` prefix, when there is one."""
    principal: str
    """Who sends it, as the gateway authenticated them: only the thread's owner may."""
    known: KnownMessages | None = None
    known_state: str | None = None
    """``known_state.digest`` of the client's ``state``, which the sender left out of
    ``input`` (its ``state`` is ``None``) because the thread has it."""


class RunReply(Model):
    """What the ``run`` update returns once the run has ended: all its events."""

    run_key: str
    events: list[SequencedEvent]
    snapshot_prefix: int | None = None
    """When set, each ``MESSAGES_SNAPSHOT`` in ``events`` lacks its first this many
    messages: the request's ``known`` ones, which the sender has."""
    state_patches: list[list[dict[str, Any]]] | None = None
    """When set, each ``STATE_SNAPSHOT`` in ``events`` lacks its snapshot: it is the one
    before it (the first: the request's ``known_state``, which the sender has) with its
    patch here applied, in order (``known_state.leave_out``)."""


class RunLookup(QueryAnswer):
    """What the ``run_record`` query finds: the thread's owner, whom the gateway checks
    the reader against, and the latest run with the asked ``runId``."""

    owner: str
    run: RunRecord | None


class EventsQuery(Model):
    """Read a run's events after a sequence number (``after=0`` for all)."""

    run_key: str
    after: int = 0
    known: KnownMessages | None = None
    """The first messages of the conversation the reader has (the run's own request's
    ``known``): the page's ``MESSAGES_SNAPSHOT`` events leave them out, as the run's
    reply does, where the thread's conversation still begins with them."""


class EventPage(QueryAnswer):
    """A run's events after the requested sequence number."""

    events: list[SequencedEvent]
    ended: bool
    """Whether the run has emitted its terminal event."""
    snapshot_prefix: int | None = None
    """When set, each ``MESSAGES_SNAPSHOT`` in ``events`` lacks its first this many
    messages: the query's ``known`` ones, which the reader has."""


class LogQuery(Model):
    """Read the thread's event log, across its runs, after a sequence number."""

    after: int = 0


class LogPage(QueryAnswer):
    """The oldest events of the log with ``seq`` above the requested one that fit one
    answer (``workflows.event_log.LOG_PAGE_EVENTS`` and ``LOG_PAGE_BYTES``)."""

    owner: str
    """The thread's owner, whom the gateway checks the reader against."""
    events: list[SequencedEvent]
    more: bool
    """Whether the log has events after this page's already."""
    running: bool
    """Whether a run is in progress (or waiting its turn): more events are coming soon."""


class ThreadView(QueryAnswer):
    """The thread as ``GET /threads/{thread_id}`` shows it."""

    thread_id: str
    agent: str
    owner: str
    status: ThreadStatus
    messages: list[Message]
    state: dict[str, Any]
    interrupts: list[Interrupt]
    runs: list[RunRecord]
    audit: list[AuditRecord]
    memory: dict[str, Any]
    subagents: list[SubagentRecord] = Field(default_factory=list)


STREAM_SIGNAL = "model_stream"
"""The thread workflow's signal that carries a model's output while it is generated."""


class ToolCallDelta(Model):
    """A piece of the ``index``-th tool call of a reply: its name first, then arguments."""

    index: int
    name: str | None = None
    arguments: str = ""


class ModelDelta(Model):
    """What a model activity generated since its last delta, signalled to its thread as
    ``STREAM_SIGNAL`` (see ``activities.chat.DeltaSender``)."""

    activity_id: str
    attempt: int
    text: str = ""
    tool_calls: list[ToolCallDelta] = Field(default_factory=list)


DecisionStatus = Literal["resolved", "cancelled"]


class DecisionRequest(Model):
    """The ``decide`` update's argument: one principal's decision on one open interrupt,
    from anywhere (``POST /threads/{threadId}/interrupts/{interruptId}/decisions``)."""

    interrupt_id: str
    principal: str
    """Who decides, as the gateway authenticated them."""
    groups: list[str] = Field(default_factory=list)
    """Their groups (the token's groups claim)."""
    status: DecisionStatus
    payload: Any = None
    """The answer, for ``resolved``; ``null`` is none, as in a resume entry."""

    @property
    def entry(self) -> ResumeEntry:
        """The decision as the resume entry that would give the same answer."""
        if self.payload is None:
            return ResumeEntry(interrupt_id=self.interrupt_id, status=self.status)
        return ResumeEntry(interrupt_id=self.interrupt_id, status=self.status, payload=self.payload)


class DecisionResult(Model):
    """What ``decide`` returns, once the decision is recorded.

    When it settled the thread's last open interrupt, the agent continues in a run of
    its own (``run_id``), which may still be in progress: its events are read with
    ``GET /threads/{threadId}/runs/{runId}/events``.
    """

    outcome: Literal["settled", "pending", "repeated"]
    """``settled``: this decision settled the interrupt; ``pending``: it counted, and more
    approvals are needed; ``repeated``: it had counted already, nothing changed."""
    interrupt_id: str
    status: AnswerStatus | None = None
    """How the interrupt was settled (``None`` while pending)."""
    approved: bool | None = None
    """The settling payload's ``approved``, when it has one (a denial: ``false``)."""
    received: int | None = None
    """Approvals counted toward the answer; ``None`` for a repeat of a settled decision,
    when the thread no longer keeps the count."""
    needed: int | None = None
    """Approvals the interrupt needs (``None`` likewise)."""
    decided_by: list[str] = Field(default_factory=list)
    """Who settled it, once settled."""
    run_id: str | None = None
    """The run the thread continued in, when this decision let it continue."""


class ReminderNotice(Model):
    """The ``send_reminder`` activity's input, and what the webhook receives (as camelCase
    JSON): which interrupt, and until when."""

    type: Literal["interrupt.reminder"] = "interrupt.reminder"
    thread_id: str
    agent: str
    interrupt: Interrupt
    expires_at: str
    """The interrupt's deadline (``interrupt.expiresAt``), repeated for easy filtering."""
    remind_at: datetime
    """When this reminder was due: with the interrupt, it names the reminder."""

    @property
    def idempotency_key(self) -> str:
        return f"{self.thread_id}/{self.interrupt.id}/{self.remind_at.isoformat()}"


class EscalationTargets(Model):
    """Who may decide an interrupt since it escalated."""

    users: list[str]
    groups: list[str]


class EscalationNotice(Model):
    """The ``send_escalation`` activity's input, and what the webhook receives (as
    camelCase JSON): an interrupt nobody settled in time, and who may decide it now."""

    type: Literal["interrupt.escalated"] = "interrupt.escalated"
    thread_id: str
    agent: str
    interrupt: Interrupt
    escalated_to: EscalationTargets

    @property
    def idempotency_key(self) -> str:
        return f"{self.thread_id}/{self.interrupt.id}/escalated"


class RetentionSweepStart(Model):
    """The retention sweep's input (``workflows/retention.py``), which its schedule
    starts it with: the worker's ``AGUI_THREAD_RETENTION``."""

    retention: timedelta
    """Threads idle longer than this are deleted."""
    limit: int = Field(default=500, ge=1, le=1000)
    """The most threads one sweep deletes (one visibility page); the next takes the rest."""


class SweepRequest(Model):
    """The ``sweep_idle_threads`` activity's input: which threads are idle."""

    thread_type: str
    """The thread workflow's type name."""
    task_queue: str
    """The task queue whose threads are swept (the sweep's own)."""
    cutoff: datetime
    """Threads whose ``AguiLastActivity`` is before this are deleted."""
    limit: int


class SweepReport(Model):
    """What one sweep did."""

    deleted: int
    """Threads deleted."""
    more: bool
    """More idle threads were found than one sweep deletes."""


class CallerLookup(Model):
    """The ``caller_identity`` activity's input: which message of the thread's current
    workflow run to find the sender of, an update by its id or the n-th signal of a name."""

    workflow_id: str
    run_id: str
    update_id: str | None = None
    signal_name: str | None = None
    signal_index: int = 0
    """With ``signal_name``: which of the run's signals of that name (0 is the first)."""
    max_chars: int
    """The longest identity returned; a longer one is cut."""
