"""Guards the interrupt contract (``workflows/interrupts.py``): which resumes a thread
accepts, and the stable code of each rejection."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ag_ui.core import Interrupt, ResumeEntry
from temporalio.exceptions import ApplicationError

from workflows.errors import ErrorCode
from workflows.interrupts import answer_key, check_resume, is_replay, parse_expiry
from workflows.models import AnswerStatus, AppliedAnswer

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {
            "type": "object",
            "properties": {"to": {"type": "string", "format": "email"}},
        },
    },
    "required": ["approved"],
}


def interrupt(
    interrupt_id: str,
    *,
    schema: dict[str, Any] | None = None,
    expires_at: str | None = None,
) -> Interrupt:
    return Interrupt(
        id=interrupt_id,
        reason="tool_call",
        response_schema=schema,
        expires_at=expires_at,
    )


def entry(interrupt_id: str, status: str = "resolved", **fields: Any) -> ResumeEntry:
    """A resume entry as it arrives on the wire: ``payload`` only when given."""
    return ResumeEntry.model_validate({"interruptId": interrupt_id, "status": status, **fields})


def applied(
    resume_entry: ResumeEntry,
    run_key: str = "run-1",
    status: AnswerStatus | None = None,
    expires_at: str | None = None,
) -> AppliedAnswer:
    """The ledger record of ``resume_entry`` as the thread applied it."""
    return AppliedAnswer(
        interrupt_id=resume_entry.interrupt_id,
        status=status or resume_entry.status,
        key=answer_key(resume_entry),
        run_key=run_key,
        expires_at=expires_at,
    )


def expired(interrupt_id: str, expires_at: str = "2026-04-30T12:00:00Z") -> AppliedAnswer:
    """The ledger record the thread writes when an interrupt's timer closes it."""
    return AppliedAnswer(
        interrupt_id=interrupt_id,
        status="expired",
        key=f"expired:{interrupt_id}",
        run_key="timer",
        expires_at=expires_at,
    )


def rejection(
    open_interrupts: list[Interrupt],
    resume: list[ResumeEntry] | None,
    ledger: dict[str, AppliedAnswer] | None = None,
    now: datetime = NOW,
) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        check_resume(open_interrupts, resume, ledger or {}, now)
    assert caught.value.non_retryable, "a rejection must not be retried"
    return caught.value


# --- check_resume: what passes ---------------------------------------------------------


@pytest.mark.parametrize("resume", [None, []])
def test_no_resume_passes_when_nothing_is_open(resume: list[ResumeEntry] | None) -> None:
    check_resume([], resume, {}, NOW)


def test_answering_every_open_interrupt_passes() -> None:
    check_resume(
        [interrupt("a", schema=APPROVAL_SCHEMA), interrupt("b")],
        [entry("b", "cancelled"), entry("a", payload={"approved": True})],
        {},
        NOW,
    )


def test_a_resolved_entry_without_a_schema_needs_no_payload() -> None:
    check_resume([interrupt("a")], [entry("a")], {}, NOW)


def test_a_cancelled_entry_needs_no_payload_even_with_a_schema() -> None:
    check_resume([interrupt("a", schema=APPROVAL_SCHEMA)], [entry("a", "cancelled")], {}, NOW)


def test_a_replay_of_the_exact_answer_to_a_closed_interrupt_passes() -> None:
    answer = entry("a", payload={"approved": True, "editedArgs": {"to": "x@y.z"}})
    # Same answer, payload keys in another order: still the same answer.
    again = entry("a", payload={"editedArgs": {"to": "x@y.z"}, "approved": True})

    check_resume([], [again], {"a": applied(answer)}, NOW)


# --- check_resume: each rule's rejection -----------------------------------------------


@pytest.mark.parametrize("resume", [None, []])
def test_input_without_a_resume_while_interrupts_are_open_is_pending(
    resume: list[ResumeEntry] | None,
) -> None:
    error = rejection([interrupt("a"), interrupt("b")], resume)

    assert error.type == ErrorCode.INTERRUPTS_PENDING
    assert "a, b" in error.message


def test_an_entry_for_no_interrupt_of_the_thread_is_unknown() -> None:
    error = rejection([interrupt("a")], [entry("a"), entry("ghost")])

    assert error.type == ErrorCode.UNKNOWN_INTERRUPT
    assert "resume[1]" in error.message
    assert "'ghost'" in error.message


def test_two_entries_for_one_interrupt_are_a_duplicate() -> None:
    error = rejection([interrupt("a")], [entry("a"), entry("a", "cancelled")])

    assert error.type == ErrorCode.DUPLICATE_RESUME_ENTRY
    assert "resume[1] answers interrupt a a second time" in error.message


def test_a_resume_that_leaves_an_interrupt_unanswered_is_incomplete() -> None:
    error = rejection([interrupt("a"), interrupt("b"), interrupt("c")], [entry("b")])

    assert error.type == ErrorCode.INCOMPLETE_RESUME
    assert "interrupts a, c unanswered" in error.message


@pytest.mark.parametrize(
    "second",
    [
        entry("a", payload={"approved": False}),
        entry("a", "cancelled"),
    ],
    ids=["another-payload", "another-status"],
)
def test_a_different_answer_to_an_answered_interrupt_is_rejected(second: ResumeEntry) -> None:
    first = entry("a", payload={"approved": True})

    error = rejection([], [second], {"a": applied(first)})

    assert error.type == ErrorCode.INTERRUPT_ALREADY_ANSWERED
    assert "resume[0]: interrupt a" in error.message


@pytest.mark.parametrize(
    "now",
    [NOW, NOW + timedelta(days=3)],
    ids=["at-the-deadline", "after-it"],
)
def test_resolving_an_open_interrupt_at_or_after_its_deadline_is_expired(now: datetime) -> None:
    deadline = "2026-05-01T12:00:00Z"

    error = rejection([interrupt("a", expires_at=deadline)], [entry("a")], now=now)

    assert error.type == ErrorCode.INTERRUPT_EXPIRED
    assert deadline in error.message


def test_resolving_an_open_interrupt_before_its_deadline_passes() -> None:
    open_one = interrupt("a", expires_at="2026-05-01T12:00:00Z")

    check_resume([open_one], [entry("a")], {}, NOW - timedelta(microseconds=1))


def test_the_deadline_is_checked_before_the_payload() -> None:
    open_one = interrupt("a", schema=APPROVAL_SCHEMA, expires_at="2026-05-01T00:00:00Z")

    error = rejection([open_one], [entry("a", payload={"approved": "not a bool"})])

    assert error.type == ErrorCode.INTERRUPT_EXPIRED


def test_cancelling_an_open_interrupt_past_its_deadline_passes() -> None:
    open_one = interrupt("a", expires_at="2026-05-01T00:00:00Z")

    check_resume([open_one], [entry("a", "cancelled")], {}, NOW)


def test_resolving_an_interrupt_its_timer_closed_is_expired() -> None:
    error = rejection([], [entry("a", payload={"approved": True})], {"a": expired("a")})

    assert error.type == ErrorCode.INTERRUPT_EXPIRED
    assert "2026-04-30T12:00:00Z" in error.message


def test_cancelling_an_interrupt_its_timer_closed_passes() -> None:
    check_resume([], [entry("a", "cancelled")], {"a": expired("a")}, NOW)


def test_resolving_without_the_payload_the_schema_asks_for_is_missing() -> None:
    error = rejection([interrupt("a", schema=APPROVAL_SCHEMA)], [entry("a")])

    assert error.type == ErrorCode.MISSING_PAYLOAD
    assert "resume[0]" in error.message


def test_an_explicit_null_payload_is_validated_not_missing() -> None:
    error = rejection([interrupt("a", schema=APPROVAL_SCHEMA)], [entry("a", payload=None)])

    assert error.type == ErrorCode.INVALID_PAYLOAD


@pytest.mark.parametrize(
    ("payload", "where", "why"),
    [
        ({"approved": "yes"}, "resume[0].payload/approved:", "is not of type 'boolean'"),
        (
            {"approved": True, "editedArgs": {"to": 5}},
            "resume[0].payload/editedArgs/to:",
            "is not of type 'string'",
        ),
        (
            {"approved": True, "editedArgs": {"to": "nobody"}},
            "resume[0].payload/editedArgs/to:",
            "is not a 'email'",
        ),
        ({}, "resume[0].payload/:", "'approved' is a required property"),
    ],
    ids=["wrong-type", "nested-path", "format", "required"],
)
def test_an_invalid_payload_names_the_failing_path(
    payload: dict[str, Any], where: str, why: str
) -> None:
    error = rejection([interrupt("a", schema=APPROVAL_SCHEMA)], [entry("a", payload=payload)])

    assert error.type == ErrorCode.INVALID_PAYLOAD
    assert error.message.startswith(where)
    assert why in error.message
    assert "interrupt a's responseSchema" in error.message


def test_the_entry_index_in_a_message_is_the_failing_ones() -> None:
    error = rejection(
        [interrupt("a"), interrupt("b", schema=APPROVAL_SCHEMA)],
        [entry("a"), entry("b", payload={"approved": 1})],
    )

    assert error.message.startswith("resume[1].payload/approved:")


# --- is_replay ---------------------------------------------------------------------------


def test_a_resume_applied_by_one_run_is_a_replay_of_that_run() -> None:
    first = [entry("a", payload={"approved": True, "n": 1}), entry("b", "cancelled")]
    ledger = {e.interrupt_id: applied(e, run_key="run-7") for e in first}
    again = [entry("b", "cancelled"), entry("a", payload={"n": 1, "approved": True})]

    assert is_replay(again, ledger) == "run-7"


@pytest.mark.parametrize(
    "resume",
    [
        [entry("a", payload={"approved": False})],
        [entry("a", payload={"approved": True}), entry("c")],
        [],
    ],
    ids=["changed-answer", "one-entry-not-applied", "empty"],
)
def test_a_resume_not_applied_exactly_is_no_replay(resume: list[ResumeEntry]) -> None:
    ledger = {"a": applied(entry("a", payload={"approved": True}))}

    assert is_replay(resume, ledger) is None


def test_answers_applied_by_two_runs_are_no_replay_of_either() -> None:
    a, b = entry("a"), entry("b")
    ledger = {"a": applied(a, run_key="run-1"), "b": applied(b, run_key="run-2")}

    assert is_replay([a, b], ledger) is None


# --- answer_key ----------------------------------------------------------------------------


def test_the_answer_key_ignores_the_order_of_payload_keys_at_any_depth() -> None:
    one = entry("a", payload={"x": 1, "y": {"p": [1, 2], "q": None}})
    other = entry("a", payload={"y": {"q": None, "p": [1, 2]}, "x": 1})

    assert answer_key(one) == answer_key(other)


@pytest.mark.parametrize(
    "other",
    [
        entry("b", payload={"x": 1}),
        entry("a", "cancelled", payload={"x": 1}),
        entry("a", payload={"x": 2}),
        entry("a", payload={"x": 1, "y": 1}),
        entry("a", payload=[{"x": 1}]),
    ],
    ids=["id", "status", "value", "extra-key", "shape"],
)
def test_the_answer_key_tells_different_answers_apart(other: ResumeEntry) -> None:
    assert answer_key(entry("a", payload={"x": 1})) != answer_key(other)


def test_list_order_in_a_payload_is_part_of_the_answer() -> None:
    assert answer_key(entry("a", payload=[1, 2])) != answer_key(entry("a", payload=[2, 1]))


# --- parse_expiry ------------------------------------------------------------------------


def test_no_expires_at_never_expires() -> None:
    assert parse_expiry(interrupt("a")) is None


@pytest.mark.parametrize(
    ("expires_at", "instant"),
    [
        ("2026-11-25T17:00:00Z", datetime(2026, 11, 25, 17, 0, tzinfo=UTC)),
        ("2026-11-25T17:00:00.250Z", datetime(2026, 11, 25, 17, 0, 0, 250_000, tzinfo=UTC)),
        ("2026-11-25T19:00:00+02:00", datetime(2026, 11, 25, 17, 0, tzinfo=UTC)),
    ],
    ids=["zulu", "fraction", "offset"],
)
def test_expires_at_parses_to_an_aware_instant(expires_at: str, instant: datetime) -> None:
    parsed = parse_expiry(interrupt("a", expires_at=expires_at))

    assert parsed == instant
    assert parsed is not None and parsed.tzinfo is not None


def test_an_offset_deadline_expires_at_its_instant_not_its_wall_clock() -> None:
    # 13:00 at +02:00 is 11:00 UTC: an hour before NOW (12:00 UTC), though 13 > 12.
    open_one = interrupt("a", expires_at="2026-05-01T13:00:00+02:00")

    error = rejection([open_one], [entry("a")])

    assert error.type == ErrorCode.INTERRUPT_EXPIRED
