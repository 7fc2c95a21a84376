"""Guards the SDK journal (``workflows/sdk/journal.py``): a paused turn's steps replay in
order, a changed turn is refused, and answers attach to the step that asked.

The journal needs no workflow context (``temporalio.workflow`` is used only to pass its
imports through), so these run it directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ag_ui.core import Interrupt
from temporalio.exceptions import ApplicationError

from workflows.errors import ErrorCode
from workflows.models import Answer, Journal, JournalStep
from workflows.sdk.journal import FINISHED, Scope, answer


def taker(value: Any, calls: list[Any]) -> Callable[[], Any]:
    """A ``take`` for :meth:`Scope.step` that counts its calls."""

    async def take() -> Any:
        calls.append(value)
        return value

    return take


def answered(interrupt_id: str, payload: Any = None) -> Answer:
    return Answer(
        interrupt=Interrupt(id=interrupt_id, reason="confirmation"),
        status="resolved",
        payload=payload,
    )


# --- recorded / record -----------------------------------------------------------------


def test_a_new_scope_has_nothing_recorded_and_records_what_it_takes() -> None:
    journal = Journal()
    scope = Scope(journal, "turn")

    assert scope.recorded("model") is None
    scope.record("model", {"text": "hi"})
    assert scope.recorded("tool") is None
    scope.record("tool", 3, interrupt_ids=["i1"])

    assert journal.scopes["turn"] == [
        JournalStep(kind="model", value={"text": "hi"}),
        JournalStep(kind="tool", value=3, interrupt_ids=["i1"]),
    ]


def test_a_scope_over_a_recorded_journal_reads_its_steps_back_in_order() -> None:
    journal = Journal()
    first = Scope(journal, "turn")
    for kind, value in [("model", 1), ("tool", 2), ("model", 3)]:
        first.recorded(kind)
        first.record(kind, value)

    again = Scope(journal, "turn")
    steps = [again.recorded(kind) for kind in ("model", "tool", "model")]

    assert [step.value for step in steps if step is not None] == [1, 2, 3]
    assert again.recorded("say") is None, "past the recorded steps the turn goes on"


def test_a_step_of_another_kind_than_recorded_fails_the_agent() -> None:
    journal = Journal(scopes={"turn": [JournalStep(kind="model"), JournalStep(kind="tool")]})
    scope = Scope(journal, "turn")
    scope.recorded("model")

    with pytest.raises(ApplicationError) as caught:
        scope.recorded("say")

    assert caught.value.type == ErrorCode.AGENT_FAILED
    assert caught.value.non_retryable
    assert "step 1 of turn was 'tool', now 'say'" in caught.value.message


# --- step / once ------------------------------------------------------------------------------


async def test_a_step_is_taken_once_and_read_back_on_the_next_pass() -> None:
    journal = Journal()
    calls: list[Any] = []

    first = Scope(journal, "turn")
    assert await first.step("model", taker("a", calls)) == "a"
    assert await first.step("tool", taker({"ok": True}, calls)) == {"ok": True}

    again = Scope(journal, "turn")
    assert await again.step("model", taker("changed", calls)) == "a"
    assert await again.step("tool", taker("changed", calls)) == {"ok": True}
    assert await again.step("model", taker("b", calls)) == "b"

    assert calls == ["a", {"ok": True}, "b"]


async def test_a_step_of_another_kind_on_replay_is_refused_before_it_is_taken() -> None:
    journal = Journal()
    calls: list[Any] = []
    await Scope(journal, "turn").step("model", taker("a", calls))

    with pytest.raises(ApplicationError) as caught:
        await Scope(journal, "turn").step("tool", taker("b", calls))

    assert caught.value.type == ErrorCode.AGENT_FAILED
    assert calls == ["a"]


def test_an_effect_runs_once_across_passes() -> None:
    journal = Journal()
    effects: list[str] = []

    first = Scope(journal, "turn")
    first.once("say", lambda: effects.append("hello"))
    again = Scope(journal, "turn")
    again.once("say", lambda: effects.append("hello"))
    again.once("say", lambda: effects.append("again"))

    assert effects == ["hello", "again"]
    assert journal.scopes["turn"] == [JournalStep(kind="say"), JournalStep(kind="say")]


def test_an_effect_where_another_step_was_recorded_is_refused() -> None:
    journal = Journal(scopes={"turn": [JournalStep(kind="model")]})
    effects: list[str] = []

    with pytest.raises(ApplicationError) as caught:
        Scope(journal, "turn").once("say", lambda: effects.append("hello"))

    assert caught.value.type == ErrorCode.AGENT_FAILED
    assert effects == []


# --- child / finished / finish -------------------------------------------------------------


def test_a_child_is_named_by_its_parents_path_position_and_key() -> None:
    journal = Journal()
    turn = Scope(journal, "turn")
    turn.once("gather", lambda: None)

    first, second = turn.child("tc-1"), turn.child("tc-2")
    turn.once("gather", lambda: None)
    later = turn.child("tc-1")
    grandchild = first.child("x")

    assert [first.path, second.path, later.path] == ["turn/1.tc-1", "turn/1.tc-2", "turn/2.tc-1"]
    assert grandchild.path == "turn/1.tc-1/0.x"


async def test_children_record_apart_and_are_found_again_on_the_next_pass() -> None:
    journal = Journal()
    calls: list[Any] = []
    turn = Scope(journal, "turn")
    turn.once("gather", lambda: None)
    await turn.child("a").step("tool", taker("A", calls))
    await turn.child("b").step("tool", taker("B", calls))

    again = Scope(journal, "turn")
    again.once("gather", lambda: None)

    assert await again.child("b").step("tool", taker("changed", calls)) == "B"
    assert await again.child("a").step("tool", taker("changed", calls)) == "A"
    assert journal.scopes["turn"] == [JournalStep(kind="gather")]
    assert calls == ["A", "B"]


def test_a_scope_is_finished_only_once_it_has_returned() -> None:
    journal = Journal()
    scope = Scope(journal, "turn/0.a")
    assert scope.finished() is None

    scope.recorded("tool")
    scope.record("tool", 1)
    assert scope.finished() is None

    scope.finish({"result": 2})

    again = Scope(journal, "turn/0.a")
    finished = again.finished()
    assert finished is not None
    assert finished.kind == FINISHED
    assert finished.value == {"result": 2}


# --- answer ------------------------------------------------------------------------------------


def test_answers_attach_in_the_steps_order_once_every_id_is_answered() -> None:
    step = JournalStep(kind="interrupts", interrupt_ids=["i1", "i2"])
    journal = Journal(scopes={"turn": [JournalStep(kind="model"), step]})
    one, two = answered("i1", 1), answered("i2", 2)

    answer(journal, {"i1": one})
    assert step.answers is None, "half the answers are not an answer"

    answer(journal, {"i2": two, "i1": one})
    assert step.answers == [one, two]
    assert journal.scopes["turn"][0].answers is None


def test_answers_reach_steps_in_child_scopes_and_leave_others_alone() -> None:
    in_child = JournalStep(kind="interrupts", interrupt_ids=["c1"])
    unanswered = JournalStep(kind="interrupts", interrupt_ids=["t1"])
    journal = Journal(scopes={"turn": [unanswered], "turn/0.a": [in_child]})
    reply = answered("c1", "yes")

    answer(journal, {"c1": reply})

    assert in_child.answers == [reply]
    assert unanswered.answers is None


def test_a_step_already_answered_keeps_its_answers() -> None:
    first = answered("i1", "first")
    step = JournalStep(kind="interrupts", interrupt_ids=["i1"], answers=[first])
    journal = Journal(scopes={"turn": [step]})

    answer(journal, {"i1": answered("i1", "second")})

    assert step.answers == [first]
