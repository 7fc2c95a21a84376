"""The thread's budgets: how much any client, model or agent can make a thread hold.

Temporal refuses a payload over 2 MB (a workflow input, an update's result, a
continue-as-new's input), a search attribute value over 2 KB, and a workflow task that
does not yield within 2 seconds. A thread that crossed one of them would be terminated or
stuck retrying a workflow task forever. So every way in is bounded here, with room to
spare, and each bound is enforced where the thread takes the data in:

- a run's input is checked by the ``run_agent`` validator (:func:`check_run_input`): too
  much is rejected with ``INPUT_TOO_LARGE`` before anything is written;
- what an agent's turn produces (events, messages, questions, state) is checked as it
  arrives; too much ends the run with ``RUN_ERROR`` (``OUTPUT_TOO_LARGE``,
  ``TOO_MANY_INTERRUPTS``, ``INVALID_QUESTION``) and leaves the thread as the run found it,
  open to new runs;
- what the thread keeps (messages, the applied-answers ledger, the audit trail, the
  events of earlier runs) is trimmed, oldest first, to its budget.

Worst case, everything at its budget, a thread carries about 1.7 MB across a
continue-as-new (approver policies add at most ~5 KiB to each open interrupt and its
answer: the policy is shown once, in the interrupt, with who approved so far) and a run's
result is about 1.3 MB; a typical thread carries kilobytes.
Sizes are the data's JSON in UTF-8, as Temporal's pydantic data converter sends it.
Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

import jsonschema
import pydantic_core
from ag_ui.core import Interrupt, RunAgentInput
from temporalio.exceptions import ApplicationError

from workflows.errors import ErrorCode, rejection
from workflows.models import DecisionRequest, ThreadState

if TYPE_CHECKING:
    from workflows.approvers import Approvers
    from workflows.questions import Question

KIB = 1024

# --- a run's input (checked by the run_agent validator: INPUT_TOO_LARGE) -------------------

MAX_INPUT_MESSAGES = 1_000
"""Messages in one run's input."""
MAX_MESSAGE_BYTES = 128 * KIB
"""One message, from a client or from the agent (a model's reply, a tool's result)."""
MAX_INPUT_BYTES = 768 * KIB
"""One run's whole input: messages, state, tools, context, forwarded props, resume. Room
for the whole conversation the thread keeps (``KEPT_MESSAGES_BYTES``), which clients
resend each run, and the new input."""
MAX_RESUME_BYTES = 128 * KIB
"""One run's resume entries, payloads included (a client's or an operator's)."""
MAX_STATE_BYTES = 128 * KIB
"""The thread's shared ``state`` once the input's is merged in; also after the agent's
turn changed it (``OUTPUT_TOO_LARGE`` then)."""

# --- what a turn produces (a run that exceeds one ends with RUN_ERROR) --------------------

MAX_INTERRUPTS_PER_RUN = 20
"""Interrupts one run may open (``TOO_MANY_INTERRUPTS``); also all a thread can have open."""
MAX_EXPIRY = timedelta(days=365)
"""How far ahead a question may expire (``INVALID_QUESTION``)."""
MAX_REMINDERS_PER_INTERRUPT = 5
"""Reminders before one interrupt's deadline (``INVALID_QUESTION``)."""
MAX_REASON_CHARS = 64
"""An interrupt's ``reason``, which the ``AguiInterruptReasons`` search attribute lists."""
MAX_INTERRUPT_BYTES = 8 * KIB
"""One interrupt as clients see it: message, schema, metadata (``INVALID_QUESTION``)."""
SCHEMAS_CHECKED_KEPT = 256
"""Response schemas whose check (against the metaschema) a worker keeps the verdict of."""
MAX_APPROVERS = 20
"""Users, and groups, an approver policy names (and its escalation); also the most
approvals it may need (``INVALID_QUESTION``). The interrupt shows them all, and names
who approved so far."""
MAX_APPROVER_NAME_CHARS = 128
"""A user or group an approver policy names (``INVALID_QUESTION``)."""
MAX_DECIDER_CHARS = 255
"""A decider's subject, which the interrupt names once their approval counts (OIDC
subjects are at most 255 characters); a longer one is ``INPUT_TOO_LARGE``."""
MAX_RUN_EVENT_BYTES = 256 * KIB
"""The events an agent's turn emits in one run (text and tool-call deltas, tool results);
the thread's own (``RUN_STARTED``, snapshots, the terminal event) are bounded apart."""
MAX_MEMORY_BYTES = 64 * KIB
"""What the agent remembers for the thread (``ctx.memory``), after a turn."""
MAX_JOURNAL_BYTES = 128 * KIB
"""A paused turn's journal: the steps it took and the answers it got (``ctx.interrupt``
in a loop, say); a turn past it is abandoned with ``OUTPUT_TOO_LARGE``."""
STREAMED_DELTAS_PER_REPLY = 256
"""Streamed deltas of one model reply sent as events one by one; the rest of the reply
follows in one delta when the model is done (a fast model may signal thousands)."""
WORD_DELTAS_PER_REPLY = 64
"""Deltas a reply that arrives whole is sent in (words grouped to fit)."""

# --- what the thread keeps (trimmed, oldest first) ----------------------------------------

KEPT_MESSAGES_BYTES = 384 * KIB
"""The conversation the thread keeps: past it the oldest messages are dropped (the model
and ``MESSAGES_SNAPSHOT`` then start later in the conversation). A dropped message that a
client sends again is recognised (``DROPPED_IDS_KEPT``) and not added again."""
DROPPED_IDS_KEPT = MAX_INPUT_MESSAGES
"""Digests of the newest dropped message ids the thread remembers: a client resending its
whole conversation (at most ``MAX_INPUT_MESSAGES``) never adds a dropped one back."""
APPLIED_KEPT = 500
"""Answers in the idempotency ledger (``applied``), newest kept. A resume that repeats an
answer evicted from it is no longer recognised as a repeat: its interrupt is long closed,
so it is rejected with ``UNKNOWN_INTERRUPT``, changing nothing."""
AUDIT_KEPT = 50
"""Operator actions in the audit trail, newest kept."""
SUBAGENTS_KEPT = 20
"""Ended sub-agent runs the thread lists (``GET /threads/{id}``), newest kept; live ones
are always listed."""
MAX_SUBAGENT_TASK_BYTES = 64 * KIB
"""A sub-agent's task (its first message); a longer one fails the delegating turn."""
AUDIT_TEXT_CHARS = 1_000
"""An audit record's operator name and error message are cut to this."""
AUDIT_IDENTITY_CHARS = 200
"""An audit record's caller identity (as Temporal recorded it) is cut to this: enough for
``temporal-cli:<user>@<host>`` or an email, and 50 of them stay well within the trail."""
AUDIT_KEPT_BYTES = 64 * KIB
"""The audit trail's size: past it older records go too (the newest always stays); a
resume refused for its size is recorded without its entries."""
CARRIED_EVENT_BYTES = 256 * KIB
"""Events of earlier runs carried across a continue-as-new (with ``RUNS_CARRIED`` runs at
most): fewer runs are carried when theirs are larger; the latest run always is. Sized as
the log keeps them (a ``STATE_SNAPSHOT`` as its patch), plus the first carried
``STATE_SNAPSHOT`` made whole, at most ``MAX_STATE_BYTES``."""

# --- what operators and listings see -----------------------------------------------------

INTERRUPT_IDS_SHOWN = 20
"""Ids in the ``AguiInterruptIds`` search attribute (the first open ones): ~900 bytes,
under Temporal's 2 KB per search attribute value. No more can be open."""
MEMO_MESSAGE_CHARS = 500
"""An interrupt's ``message`` in the memo (``GET /interrupts``) is cut to this."""
MEMO_INTERRUPT_BYTES = 2 * KIB
"""An interrupt in the memo larger than this (message cut) is listed without its
``responseSchema`` and ``metadata``, marked ``metadata.truncated``; ``GET
/threads/{threadId}`` has it whole."""


def to_json(value: Any) -> bytes:
    """``value`` as JSON: pydantic models by alias, as the data converter sends them."""
    return pydantic_core.to_json(value, by_alias=True, fallback=str)


def json_size(value: Any) -> int:
    """Bytes of ``value`` as JSON (``to_json``)."""
    return len(to_json(value))


def check_run_input(run_input: RunAgentInput, thread: ThreadState) -> None:
    """Reject a run's input too large for the thread to take (``INPUT_TOO_LARGE``).

    Args:
        run_input: The run's input, as the client sent it.
        thread: The thread, whose state the input's is merged into.
    """
    messages = run_input.messages
    if len(messages) > MAX_INPUT_MESSAGES:
        raise _too_large(
            f"The input has {len(messages)} messages; a run takes at most "
            f"{MAX_INPUT_MESSAGES}. Send only the messages the thread does not have."
        )
    for index, message in enumerate(messages):
        size = json_size(message)
        if size > MAX_MESSAGE_BYTES:
            raise _too_large(
                f"messages[{index}] is {size} bytes; a message may be at most "
                f"{MAX_MESSAGE_BYTES} bytes."
            )
    if run_input.resume:
        size = json_size(run_input.resume)
        if size > MAX_RESUME_BYTES:
            raise _too_large(
                f"The resume is {size} bytes; it may be at most {MAX_RESUME_BYTES} bytes."
            )
    size = json_size(run_input)
    if size > MAX_INPUT_BYTES:
        raise _too_large(
            f"The input is {size} bytes; a run's input may be at most {MAX_INPUT_BYTES} "
            "bytes. Send only the messages the thread does not have."
        )
    if isinstance(run_input.state, dict) and run_input.state:
        size = json_size({**thread.state, **run_input.state})
        if size > MAX_STATE_BYTES:
            raise _too_large(
                f"The thread's state would be {size} bytes with the input's; it may be at "
                f"most {MAX_STATE_BYTES} bytes."
            )


def check_decision_size(request: DecisionRequest) -> None:
    """Reject a decision too large to take (``INPUT_TOO_LARGE``): its payload is held to a
    resume's budget, its decider's subject to ``MAX_DECIDER_CHARS``."""
    if len(request.principal) > MAX_DECIDER_CHARS:
        raise _too_large(
            f"The decider's subject is {len(request.principal)} characters; at most "
            f"{MAX_DECIDER_CHARS}."
        )
    size = json_size(request.payload)
    if size > MAX_RESUME_BYTES:
        raise _too_large(
            f"The decision's payload is {size} bytes; it may be at most {MAX_RESUME_BYTES}."
        )


def check_resume_size(resume: Sequence[Any]) -> None:
    """Reject an operator's resume too large to apply or to audit (``INPUT_TOO_LARGE``)."""
    size = json_size(list(resume))
    if size > MAX_RESUME_BYTES:
        raise _too_large(f"The resume is {size} bytes; it may be at most {MAX_RESUME_BYTES}.")


def expiry(expires: timedelta | datetime | None, now: datetime) -> datetime | None:
    """The moment a question asked at ``now`` expires, or why it cannot be asked.

    Raises:
        ApplicationError: ``INVALID_QUESTION``: a moment without a time zone, or one
            further than ``MAX_EXPIRY`` ahead (or beyond what a datetime holds).
    """
    if expires is None:
        return None
    if isinstance(expires, datetime):
        if expires.utcoffset() is None:
            raise invalid_question(f"expires={expires!r} has no time zone; give one (UTC).")
        moment = expires
    else:
        if expires > MAX_EXPIRY:
            raise invalid_question(
                f"expires={expires} is further ahead than {MAX_EXPIRY.days} days."
            )
        moment = now + expires
    if moment - now > MAX_EXPIRY:
        raise invalid_question(f"expires={moment} is further ahead than {MAX_EXPIRY.days} days.")
    return moment


def check_questions(
    questions: Sequence[Question],
    asked_in_run: int,
    default_remind_before: Sequence[timedelta],
    now: datetime,
) -> None:
    """Reject questions the thread cannot open, before it opens any of them.

    Args:
        questions: What the turn asks now.
        asked_in_run: Interrupts the run has opened already.
        default_remind_before: The agent's reminders, for questions that name none.
        now: The moment they are asked.

    Raises:
        ApplicationError: ``TOO_MANY_INTERRUPTS``, or ``INVALID_QUESTION`` naming what is
            wrong with which question.
    """
    if asked_in_run + len(questions) > MAX_INTERRUPTS_PER_RUN:
        raise ApplicationError(
            f"The agent asked {asked_in_run + len(questions)} questions in one run; a run may "
            f"open at most {MAX_INTERRUPTS_PER_RUN} interrupts. Nothing was asked.",
            type=ErrorCode.TOO_MANY_INTERRUPTS.value,
            non_retryable=True,
        )
    for question in questions:
        _check_question(question, default_remind_before, now)


def _check_question(
    question: Question, default_remind_before: Sequence[timedelta], now: datetime
) -> None:
    what = f"The question {question.reason[:MAX_REASON_CHARS]!r}"
    if not question.reason or len(question.reason) > MAX_REASON_CHARS:
        raise invalid_question(f"{what}: a reason has 1 to {MAX_REASON_CHARS} characters.")
    reminders = default_remind_before if question.remind_before is None else question.remind_before
    if question.expires_at is not None:
        expiry(question.expires_at, now)
        if len(reminders) > MAX_REMINDERS_PER_INTERRUPT:
            raise invalid_question(
                f"{what}: {len(reminders)} reminders; at most {MAX_REMINDERS_PER_INTERRUPT}."
            )
        for before in reminders:
            if not timedelta(0) <= before <= MAX_EXPIRY:
                raise invalid_question(
                    f"{what}: remind_before {before} is not between 0 and {MAX_EXPIRY.days} days."
                )
    if question.approvers is not None:
        _check_approvers(what, question.approvers)
    if question.response_schema is not None:
        error = _schema_error(question.response_schema)
        if error is not None:
            raise invalid_question(f"{what}: its response schema is invalid: {error}")
    size = json_size(question)
    if size > MAX_INTERRUPT_BYTES:
        raise invalid_question(
            f"{what} is {size} bytes; an interrupt may be at most {MAX_INTERRUPT_BYTES}."
        )


def _schema_error(schema: dict[str, Any]) -> str | None:
    """What is wrong with JSON schema ``schema``, if anything.

    The verdicts on schemas that fit an interrupt are kept by the schema's text
    (``SCHEMAS_CHECKED_KEPT`` of them): checking a schema against the metaschema is the
    costliest part of asking a question, and agents ask the same few again and again.
    A verdict depends on the text alone, so a kept one is the one a new check would give.
    """
    text = json.dumps(schema, sort_keys=True)
    if len(text) > MAX_INTERRUPT_BYTES:
        return _checked_schema(text)  # too large for any interrupt: not worth keeping
    return _kept_schema_check(text)


def _checked_schema(text: str) -> str | None:
    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(text))
    except jsonschema.SchemaError as error:
        return str(error.message)
    return None


_kept_schema_check = functools.lru_cache(maxsize=SCHEMAS_CHECKED_KEPT)(_checked_schema)


def _check_approvers(what: str, approvers: Approvers) -> None:
    """An approver policy the thread can show and enforce: ``MAX_APPROVERS`` names of
    ``MAX_APPROVER_NAME_CHARS`` each, at most ``MAX_APPROVERS`` approvals, an escalation
    due within ``MAX_EXPIRY``, and someone who may approve."""
    escalation = approvers.escalation
    named = [("users", approvers.users), ("groups", approvers.groups)]
    if escalation is not None:
        named += [("escalation users", escalation.users), ("escalation groups", escalation.groups)]
    for kind, names in named:
        if len(names) > MAX_APPROVERS:
            raise invalid_question(
                f"{what}: {len(names)} approver {kind}; at most {MAX_APPROVERS}."
            )
        if any(not 1 <= len(name) <= MAX_APPROVER_NAME_CHARS for name in names):
            raise invalid_question(
                f"{what}: approver {kind} have 1 to {MAX_APPROVER_NAME_CHARS} characters."
            )
    if approvers.needed > MAX_APPROVERS:
        raise invalid_question(
            f"{what}: it needs {approvers.needed} approvals; at most {MAX_APPROVERS}."
        )
    if escalation is not None and not timedelta(0) < escalation.after <= MAX_EXPIRY:
        raise invalid_question(
            f"{what}: escalation after {escalation.after} is not between 0 and "
            f"{MAX_EXPIRY.days} days."
        )
    if approvers.exclude_requester and not (approvers.users or approvers.groups):
        raise invalid_question(
            f"{what}: it excludes the requester and names no other approver, so nobody "
            "could approve it."
        )


def check_message(size: int) -> None:
    """Refuse a message the agent adds that is over ``MAX_MESSAGE_BYTES``."""
    if size > MAX_MESSAGE_BYTES:
        raise output_too_large(
            f"The agent added a message of {size} bytes; a message may be at most "
            f"{MAX_MESSAGE_BYTES} bytes."
        )


def check_run_events(size: int) -> None:
    """Refuse an event that takes a run's agent events over ``MAX_RUN_EVENT_BYTES``."""
    if size > MAX_RUN_EVENT_BYTES:
        raise output_too_large(
            f"The agent's events in this run exceed {MAX_RUN_EVENT_BYTES} bytes; the run "
            "was stopped."
        )


class TurnData(NamedTuple):
    """What an agent's turn writes to: the thread's state and memory as JSON, and the
    size of its journal (see :func:`check_turn_data`)."""

    state: bytes
    memory: bytes
    journal_bytes: int

    @property
    def sizes(self) -> dict[str, int]:
        """The size of each, by :data:`TURN_DATA_LIMITS`' names."""
        return {"state": len(self.state), "memory": len(self.memory), "journal": self.journal_bytes}


def turn_data(thread: ThreadState) -> TurnData:
    """What an agent's turn writes to in ``thread``, as it is now.

    Raises:
        ApplicationError: ``AGENT_FAILED``: the agent left a value there that is not
            JSON (which the thread could neither send nor carry).
    """
    encoded = {}
    for name, value in (("state", thread.state), ("memory", thread.memory)):
        if not isinstance(value, dict):
            raise _not_json(name, f"it is a {type(value).__name__}, not a JSON object")
        try:
            encoded[name] = pydantic_core.to_json(value)
        except pydantic_core.PydanticSerializationError as error:
            raise _not_json(name, str(error)) from error
    return TurnData(encoded["state"], encoded["memory"], json_size(thread.journal))


def _not_json(name: str, why: str) -> ApplicationError:
    return ApplicationError(
        f"The agent's turn left the thread's {name} unusable ({why}); the run's changes to "
        "state and memory were undone.",
        type=ErrorCode.AGENT_FAILED.value,
        non_retryable=True,
    )


TURN_DATA_LIMITS = {
    "state": MAX_STATE_BYTES,
    "memory": MAX_MEMORY_BYTES,
    "journal": MAX_JOURNAL_BYTES,
}


def check_turn_data(before: dict[str, int], after: dict[str, int]) -> None:
    """Refuse what a turn grew over its budget (sizes from :func:`turn_data`, before and
    after the turn); data over budget that the turn did not grow (carried from
    before the budgets) passes, so such a thread still runs."""
    for name, limit in TURN_DATA_LIMITS.items():
        if after[name] > limit and after[name] > before[name]:
            raise output_too_large(
                f"The agent's turn left its {name} at {after[name]} bytes; it may be at most "
                f"{limit} bytes. The run's changes to state and memory were undone."
            )


def messages_to_drop(sizes: Sequence[int]) -> int:
    """How many of the oldest messages (of ``sizes``, oldest first) to drop so that the
    rest fit ``KEPT_MESSAGES_BYTES``; the newest is always kept."""
    return records_to_drop(sizes, len(sizes), KEPT_MESSAGES_BYTES)


def runs_to_carry(event_sizes: Sequence[int]) -> int:
    """How many of the newest runs (whose events take ``event_sizes`` bytes, oldest
    first) fit ``CARRIED_EVENT_BYTES``; at least the latest."""
    total, carried = 0, 0
    for size in reversed(event_sizes):
        total += size
        if carried and total > CARRIED_EVENT_BYTES:
            break
        carried += 1
    return carried


def records_to_drop(sizes: Sequence[int], kept: int, budget: int) -> int:
    """How many of the oldest records (of ``sizes``, oldest first) to drop so that at most
    ``kept`` remain and they fit ``budget`` bytes; the newest is always kept."""
    dropped = max(len(sizes) - kept, 0)
    total = sum(sizes[dropped:])
    while total > budget and dropped < len(sizes) - 1:
        total -= sizes[dropped]
        dropped += 1
    return dropped


def id_digest(message_id: str) -> str:
    """A dropped message's id as the thread remembers it: short, whatever its length."""
    return hashlib.sha256(message_id.encode()).hexdigest()[:16]


def memo_interrupt(interrupt: Interrupt) -> dict[str, Any]:
    """``interrupt`` as the memo lists it: whole when small; else its message cut to
    ``MEMO_MESSAGE_CHARS``, and if still over ``MEMO_INTERRUPT_BYTES``, without its
    ``responseSchema`` and ``metadata``. A cut one says so: ``metadata.truncated``."""
    shown = interrupt.model_dump(mode="json", by_alias=True, exclude_none=True)
    if json_size(shown) <= MEMO_INTERRUPT_BYTES:
        return shown
    message = shown.get("message")
    if isinstance(message, str) and len(message) > MEMO_MESSAGE_CHARS:
        shown["message"] = message[: MEMO_MESSAGE_CHARS - 1] + "…"
    shown["metadata"] = {**shown.get("metadata", {}), "truncated": True}
    if json_size(shown) > MEMO_INTERRUPT_BYTES:
        shown.pop("responseSchema", None)
        shown["metadata"] = {"truncated": True}
    return shown


def invalid_question(message: str) -> ApplicationError:
    """The error of a question the thread refuses to open."""
    return ApplicationError(message, type=ErrorCode.INVALID_QUESTION.value, non_retryable=True)


def output_too_large(message: str) -> ApplicationError:
    """The error of agent output over its budget."""
    return ApplicationError(message, type=ErrorCode.OUTPUT_TOO_LARGE.value, non_retryable=True)


def _too_large(message: str) -> ApplicationError:
    return rejection(ErrorCode.INPUT_TOO_LARGE, message)
