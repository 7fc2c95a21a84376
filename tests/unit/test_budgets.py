"""Guards the thread's budgets (``workflows/budgets.py``) and what keeps the thread's data
within them: the input check, question checks, trimming, the memo and search
attributes, the conversation's dropped messages and the carried events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ag_ui.core import Interrupt, ResumeEntry, RunAgentInput, TextMessageContentEvent, UserMessage
from temporalio.exceptions import ApplicationError

from activities.tooling import tool
from workflows import budgets, visibility
from workflows.errors import ErrorCode
from workflows.event_log import EventLog
from workflows.interrupts import answer_key, is_replay
from workflows.models import AppliedAnswer, Journal, JournalStep, RunRecord, ThreadState
from workflows.questions import Ask, Question
from workflows.sdk import Approval
from workflows.sdk.replies import word_deltas
from workflows.sdk.tools import ToolCallView

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def thread(**fields: Any) -> ThreadState:
    return ThreadState(thread_id="t1", agent="demo", owner="alice", **fields)


def run_input(**fields: Any) -> RunAgentInput:
    base: dict[str, Any] = {
        "thread_id": "t1",
        "run_id": "r1",
        "state": None,
        "messages": [],
        "tools": [],
        "context": [],
        "forwarded_props": {},
    }
    return RunAgentInput(**{**base, **fields})


def user(message_id: str, content: str) -> UserMessage:
    return UserMessage(id=message_id, content=content)


def code_of(error: pytest.ExceptionInfo[ApplicationError]) -> str | None:
    return error.value.type


# --- a run's input -------------------------------------------------------------------------


def test_an_input_within_every_budget_passes() -> None:
    budgets.check_run_input(
        run_input(messages=[user("m1", "hello")], state={"a": 1}), thread(state={"b": 2})
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"messages": [user(f"m{i}", "hi") for i in range(budgets.MAX_INPUT_MESSAGES + 1)]},
        {"messages": [user("m1", "x" * budgets.MAX_MESSAGE_BYTES)]},
        {"messages": [user(f"m{i}", "x" * 100_000) for i in range(8)]},
        {"resume": [ResumeEntry(interrupt_id="i", status="resolved", payload="x" * 200_000)]},
    ],
    ids=["count", "message", "total", "resume"],
)
def test_an_input_over_a_budget_is_too_large(fields: dict[str, Any]) -> None:
    with pytest.raises(ApplicationError) as error:
        budgets.check_run_input(run_input(**fields), thread())
    assert code_of(error) == ErrorCode.INPUT_TOO_LARGE


def test_state_is_checked_as_it_would_be_once_merged() -> None:
    half = "x" * (budgets.MAX_STATE_BYTES // 2 + 10)
    budgets.check_run_input(run_input(state={"a": half}), thread())
    with pytest.raises(ApplicationError) as error:
        budgets.check_run_input(run_input(state={"a": half}), thread(state={"b": half}))
    assert code_of(error) == ErrorCode.INPUT_TOO_LARGE
    # Replacing a key replaces its size.
    budgets.check_run_input(run_input(state={"a": half}), thread(state={"a": half}))


# --- questions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expires",
    [
        timedelta(days=366),
        timedelta.max,
        datetime(2030, 1, 1),  # no time zone
        NOW + timedelta(days=400),
        datetime.max.replace(tzinfo=UTC),
    ],
    ids=["beyond-a-year", "overflowing", "naive", "moment-beyond-a-year", "the-last-moment"],
)
def test_a_question_that_expires_too_far_ahead_cannot_be_asked(
    expires: timedelta | datetime,
) -> None:
    with pytest.raises(ApplicationError) as error:
        Ask("confirmation", expires=expires).question(NOW)
    assert code_of(error) == ErrorCode.INVALID_QUESTION


def test_a_question_within_a_year_is_asked() -> None:
    question = Ask("confirmation", expires=budgets.MAX_EXPIRY).question(NOW)
    assert question.expires_at == NOW + budgets.MAX_EXPIRY


def question(**fields: Any) -> Question:
    return Question(**{"reason": "confirmation", "expires_at": NOW + timedelta(days=1), **fields})


def test_more_questions_than_a_run_may_open_are_refused_whole() -> None:
    budgets.check_questions([question()] * 20, 0, [], NOW)
    with pytest.raises(ApplicationError) as error:
        budgets.check_questions([question()] * 2, 19, [], NOW)
    assert code_of(error) == ErrorCode.TOO_MANY_INTERRUPTS


@pytest.mark.parametrize(
    ("fields", "default"),
    [
        ({"reason": "x" * (budgets.MAX_REASON_CHARS + 1)}, []),
        ({"reason": ""}, []),
        ({"remind_before": [timedelta(hours=h) for h in range(1, 7)]}, []),
        ({}, [timedelta(hours=h) for h in range(1, 7)]),
        ({"remind_before": [timedelta(hours=-1)]}, []),
        ({"remind_before": [timedelta(days=400)]}, []),
        ({"expires_at": NOW + timedelta(days=400)}, []),
        ({"response_schema": {"type": 5}}, []),
        ({"message": "x" * budgets.MAX_INTERRUPT_BYTES}, []),
    ],
    ids=[
        "long-reason",
        "no-reason",
        "too-many-reminders",
        "too-many-default-reminders",
        "reminder-after-the-deadline",
        "reminder-beyond-a-year",
        "expiry-beyond-a-year",
        "invalid-schema",
        "too-large",
    ],
)
def test_a_question_the_thread_cannot_open_is_invalid(
    fields: dict[str, Any], default: list[timedelta]
) -> None:
    with pytest.raises(ApplicationError) as error:
        budgets.check_questions([question(), question(**fields)], 0, default, NOW)
    assert code_of(error) == ErrorCode.INVALID_QUESTION


def test_an_approval_message_shows_long_arguments_cut() -> None:
    @tool
    async def send(body: str) -> str:
        """Send it."""
        return body

    call = ToolCallView("tc-1", "send", {"body": "x" * 100_000})
    ask = Approval().ask(call, send.spec)
    assert ask.message is not None and len(ask.message) < 300


def test_a_tool_that_needs_approval_cannot_be_local() -> None:
    with pytest.raises(ValueError, match="may not be local"):

        @tool(local=True, approval=Approval())
        async def pay(amount: int) -> int:
            """Pay."""
            return amount


# --- what a turn leaves --------------------------------------------------------------------


def test_a_turn_may_not_grow_its_data_over_budget() -> None:
    small = budgets.turn_data(thread()).sizes
    big = budgets.turn_data(thread(state={"a": "x" * budgets.MAX_STATE_BYTES})).sizes
    with pytest.raises(ApplicationError) as error:
        budgets.check_turn_data(small, big)
    assert code_of(error) == ErrorCode.OUTPUT_TOO_LARGE
    # Over budget from before (carried), not grown: the thread still runs.
    budgets.check_turn_data(big, big)
    journal = Journal(scopes={"turn": [JournalStep(kind="model", value="x" * 200_000)]})
    with pytest.raises(ApplicationError):
        budgets.check_turn_data(small, budgets.turn_data(thread(journal=journal)).sizes)


def test_a_turn_that_leaves_data_that_is_not_json_fails() -> None:
    with pytest.raises(ApplicationError) as error:
        budgets.turn_data(thread(memory={"x": object()}))
    assert code_of(error) == ErrorCode.AGENT_FAILED


# --- trimming ------------------------------------------------------------------------------


def test_the_oldest_records_go_first_and_the_newest_always_stays() -> None:
    assert budgets.records_to_drop([10, 10, 10], kept=2, budget=100) == 1
    assert budgets.records_to_drop([10, 10, 10], kept=5, budget=15) == 2
    assert budgets.records_to_drop([500], kept=5, budget=15) == 0
    assert budgets.records_to_drop([], kept=5, budget=15) == 0


def test_runs_carried_fit_their_budget_and_the_latest_always_does() -> None:
    limit = budgets.CARRIED_EVENT_BYTES
    assert budgets.runs_to_carry([10, 10, 10]) == 3
    assert budgets.runs_to_carry([limit, 10, 10]) == 2
    assert budgets.runs_to_carry([10, 10, limit * 2]) == 1
    assert budgets.runs_to_carry([]) == 0


def test_the_conversation_drops_its_oldest_messages_past_its_budget() -> None:
    state = thread()
    log = EventLog(state, clock=lambda: NOW)
    run = RunRecord(key="k1", run_id="r1", started_at=NOW, first_seq=log.next_seq())
    state.runs.append(run)
    log.append_messages_snapshot(run)
    body = "x" * (budgets.KEPT_MESSAGES_BYTES // 3)
    for index in range(1, 6):
        message = user(f"m{index}", body)
        log.add_message(message, budgets.to_json(message))

    assert [m.id for m in state.messages] == ["m4", "m5"]
    assert state.messages_dropped == 3
    assert log.knows("m1") and log.knows("m5") and not log.knows("m6")
    # A new log over the same (carried) state knows the same.
    assert EventLog(state, clock=lambda: NOW).knows("m2")
    # The snapshot of an empty conversation, still empty; a later one, what is kept.
    log.append_messages_snapshot(run)
    first, second = log.events_of(run)
    assert first.event.messages == []  # type: ignore[union-attr]
    assert [m.id for m in second.event.messages] == ["m4", "m5"]  # type: ignore[union-attr]


def test_the_dropped_ids_remembered_are_bounded() -> None:
    state = thread()
    log = EventLog(state, clock=lambda: NOW)
    body = "x" * (budgets.KEPT_MESSAGES_BYTES // 2)
    for index in range(budgets.DROPPED_IDS_KEPT + 10):
        message = user(f"m{index}", body)
        log.add_message(message, budgets.to_json(message))
    assert len(state.dropped_message_ids) == budgets.DROPPED_IDS_KEPT


def test_a_continue_as_new_carries_fewer_runs_when_their_events_are_large() -> None:
    state = thread()
    log = EventLog(state, clock=lambda: NOW)
    for index in range(4):
        run = RunRecord(
            key=f"k{index}", run_id=f"r{index}", started_at=NOW, first_seq=log.next_seq()
        )
        state.runs.append(run)
        delta = "x" * (budgets.CARRIED_EVENT_BYTES // 3)
        log.append(run, TextMessageContentEvent(message_id="m", delta=delta))
    carried = log.carried(10)
    assert [run.key for run in carried.runs] == ["k2", "k3"]
    assert {item.run_key for item in carried.events} == {"k2", "k3"}


# --- the ledger ----------------------------------------------------------------------------


def test_answer_keys_are_short_and_a_carried_ledgers_canonical_keys_still_match() -> None:
    entry = ResumeEntry(interrupt_id="i1", status="resolved", payload={"x": "y" * 100_000})
    assert len(answer_key(entry)) < 80
    legacy = AppliedAnswer(
        interrupt_id="i1",
        status="resolved",
        key='["i1", "resolved", {"x": 1}]',
        run_key="run-1",
    )
    same = ResumeEntry(interrupt_id="i1", status="resolved", payload={"x": 1})
    assert is_replay([same], {"i1": legacy}) == "run-1"


# --- what operators and listings see -------------------------------------------------------


def test_the_search_attribute_lists_at_most_the_budgeted_interrupt_ids() -> None:
    waiting = [Interrupt(id=f"int-{i:036d}", reason="tool_call") for i in range(30)]
    pairs = visibility.attributes("demo", "alice", "waiting", NOW, waiting)
    [ids] = [pair.value for pair in pairs if pair.key.name == "AguiInterruptIds"]
    assert ids == [i.id for i in waiting[: budgets.INTERRUPT_IDS_SHOWN]]
    assert len(str(ids).encode()) < 2048


def test_the_memo_holds_small_interrupts_whole_and_cuts_large_ones() -> None:
    small = Interrupt(id="i1", reason="confirmation", message="Sure?")
    long_message = Interrupt(id="i2", reason="confirmation", message="x" * 10_000)
    big_schema = Interrupt(
        id="i3", reason="input_required", message="Fill", response_schema={"enum": ["y" * 5_000]}
    )

    [one, two, three] = visibility.memo([small, long_message, big_schema], "alice")["interrupts"]

    assert one == {"id": "i1", "reason": "confirmation", "message": "Sure?"}
    assert len(two["message"]) == budgets.MEMO_MESSAGE_CHARS
    assert two["metadata"] == {"truncated": True}
    assert "responseSchema" not in three and three["metadata"] == {"truncated": True}
    for shown in (two, three):
        assert budgets.json_size(shown) <= budgets.MEMO_INTERRUPT_BYTES


def test_a_reply_arriving_whole_is_sent_in_a_bounded_number_of_deltas() -> None:
    assert word_deltas("Hello big world") == ["Hello", " big", " world"]
    text = " ".join(f"w{i}" for i in range(10_000))
    deltas = word_deltas(text)
    assert len(deltas) <= budgets.WORD_DELTAS_PER_REPLY
    assert "".join(deltas) == text
