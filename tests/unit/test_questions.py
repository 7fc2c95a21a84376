"""One question type: an ``Ask`` becomes the same interrupt wherever it is asked (a turn,
an approval, a tool's activity), with its deadline, reminders and answer's shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

import pytest
from ag_ui.core import Interrupt
from pydantic import BaseModel, Field, TypeAdapter
from temporalio.exceptions import ApplicationError

from activities.tooling import ToolInvocation, ToolOutcome
from workflows.models import Answer
from workflows.questions import Ask
from workflows.sdk import Approval, ToolCallView, ToolInterrupt, tool

NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)


def test_an_ask_with_a_duration_expires_that_long_after_it_is_asked() -> None:
    question = Ask("confirmation", message="Sure?", response=bool, expires=timedelta(days=2))
    opened = question.question(NOW).interrupt("int-1")
    assert opened == Interrupt(
        id="int-1",
        reason="confirmation",
        message="Sure?",
        response_schema={"type": "boolean"},
        expires_at="2026-11-25T12:00:00Z",
    )


def test_reminders_are_the_agents_unless_the_question_says_and_none_already_past() -> None:
    question = Ask("input_required", expires=timedelta(hours=3)).question(NOW)
    default = [timedelta(days=1), timedelta(hours=1)]
    assert [r.at for r in question.reminders("int-1", default, NOW)] == [NOW + timedelta(hours=2)]
    own = Ask("input_required", expires=timedelta(hours=3), remind_before=[timedelta(hours=2)])
    assert [r.at for r in own.question(NOW).reminders("int-1", default, NOW)] == [
        NOW + timedelta(hours=1)
    ]
    assert Ask("input_required").question(NOW).reminders("int-1", default, NOW) == []


def test_an_approval_asks_with_every_option_a_question_has() -> None:
    @tool
    async def refund(order_id: str, amount: float) -> str:
        """Refund."""
        return order_id

    approval = Approval(
        expires=timedelta(hours=4),
        remind_before=[timedelta(hours=1)],
        metadata={"team": "billing"},
    )
    call = ToolCallView("tc-1", "refund", {"order_id": "A1", "amount": 5})
    question = approval.ask(call, refund.spec).question(NOW)
    assert question.tool_call_id == "tc-1"
    assert question.expires_at == NOW + timedelta(hours=4)
    assert question.remind_before == [timedelta(hours=1)]
    assert question.metadata == {"team": "billing"}
    assert question.response_schema is not None
    assert question.response_schema["required"] == ["approved"]


async def test_a_tool_asks_the_same_question_from_its_activity() -> None:
    @tool
    async def transfer(amount: float) -> str:
        """Transfer."""
        raise ToolInterrupt(
            Ask(
                "confirmation",
                message=f"Send {amount:g}?",
                response=bool,
                expires=datetime(2026, 12, 1, tzinfo=UTC),
                metadata={"risk": "high"},
            ),
            respond=True,
        )

    outcome = await transfer.activity(
        ToolInvocation(tool_call_id="tc-1", thread_id="t", arguments={"amount": 5})
    )
    assert outcome.respond
    # It crosses into the workflow as JSON and opens the interrupt any ask would.
    question = ToolOutcome.model_validate_json(outcome.model_dump_json(by_alias=True)).interrupt
    assert question is not None
    assert question.interrupt("int-1") == Interrupt(
        id="int-1",
        reason="confirmation",
        message="Send 5?",
        response_schema={"type": "boolean"},
        expires_at="2026-12-01T00:00:00Z",
        metadata={"risk": "high"},
    )


def test_a_typed_reply_parses_the_answer_and_a_misfit_is_the_agents_bug() -> None:
    ask: Ask[Literal["y", "n"]] = Ask("input_required", response=Literal["y", "n"])
    interrupt = Interrupt(id="int-1", reason="input_required")
    assert ask.reply(Answer(interrupt=interrupt, status="resolved", payload="y")).value == "y"
    expired = ask.reply(Answer(interrupt=interrupt, status="expired"))
    assert (expired.resolved, expired.value) == (False, None)
    with pytest.raises(ApplicationError, match="does not fit"):
        ask.reply(Answer(interrupt=interrupt, status="resolved", payload="maybe"))


def test_a_types_schema_is_kept_but_each_question_gets_its_own_copy() -> None:
    class Filing(BaseModel):
        quarter: Literal["Q1", "Q2", "Q3", "Q4"]

    first = Ask("input_required", response=Filing).question(NOW)
    assert first.response_schema is not None
    first.response_schema["properties"]["quarter"]["enum"].append("Q5")
    second = Ask("input_required", response=Filing).question(NOW)
    assert second.response_schema == TypeAdapter(Filing).json_schema()
    # A type pydantic accepts but Python cannot hash (its metadata is a dict) is
    # derived each time.
    unhashable = Annotated[int, Field(ge=1), {"note": "not hashable"}]
    assert Ask("input_required", response=unhashable).question(NOW).response_schema == {
        "minimum": 1,
        "type": "integer",
    }
