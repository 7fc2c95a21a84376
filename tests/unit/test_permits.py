"""Action-bound approvals: an approved call runs under its approval's permit, on exactly
the arguments approved, and the conversation says when a person changed them.

The tool's side runs in ``temporalio.testing.ActivityEnvironment`` (a real activity
context); the turn's side without a workflow (``tests/unit/turns.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from ag_ui.core import Interrupt, ToolMessage
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.tooling import ToolInvocation, ToolOutcome
from tests.unit.turns import NOW, Thread, offline
from workflows.agents.payments import PAYMENTS
from workflows.approvers import arguments_digest
from workflows.errors import ErrorCode
from workflows.models import Answer, Permit
from workflows.sdk import ToolCallView, tool, tool_context

RAN: Counter[str] = Counter()
SEEN: list[Permit | None] = []


@tool
async def wire(to: str, amount: float) -> str:
    """Wire money (counts its runs, keeps the permit it saw)."""
    RAN[to] += 1
    SEEN.append(tool_context().permit)
    return f"wired {amount:g} to {to}"


def permit(arguments: dict[str, Any], tool_call_id: str = "tc-1") -> Permit:
    return Permit(
        interrupt_id="int-1",
        tool_call_id=tool_call_id,
        digest=arguments_digest(arguments),
        approvers=["bob"],
        at=NOW,
    )


def invocation(arguments: dict[str, Any], permit: Permit | None) -> ToolInvocation:
    return ToolInvocation(tool_call_id="tc-1", thread_id="t-1", arguments=arguments, permit=permit)


@pytest.fixture(autouse=True)
def fresh() -> None:
    RAN.clear()
    SEEN.clear()


async def test_a_call_on_the_approved_arguments_runs_and_sees_its_permit() -> None:
    arguments = {"to": "Robin", "amount": 50}
    granted = permit(arguments)

    outcome = await ActivityEnvironment().run(wire.activity, invocation(arguments, granted))

    assert outcome == ToolOutcome(result="wired 50 to Robin")
    [seen] = SEEN
    assert seen == granted and seen is not None and seen.approvers == ["bob"]


@pytest.mark.parametrize(
    ("carried", "granted"),
    [
        ({"to": "Mallory", "amount": 50}, permit({"to": "Robin", "amount": 50})),
        ({"to": "Robin", "amount": 5000}, permit({"to": "Robin", "amount": 50})),
        ({"to": "Robin", "amount": 50}, permit({"to": "Robin", "amount": 50}, "tc-other")),
    ],
    ids=["other-payee", "other-amount", "other-call"],
)
async def test_a_call_on_other_arguments_than_approved_is_refused_and_never_runs(
    carried: dict[str, Any], granted: Permit
) -> None:
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(wire.activity, invocation(carried, granted))

    error = refused.value
    assert (error.type, error.non_retryable) == (ErrorCode.PERMIT_MISMATCH, True)
    message = str(error)
    assert "tc-1" in message and "wire" in message
    assert granted.digest[:19] in message and arguments_digest(carried)[:19] in message
    assert "Mallory" not in message and "5000" not in message, "it names no argument"
    assert not RAN and not SEEN


async def test_a_call_without_a_permit_runs_unchecked() -> None:
    """An approval answered before the thread issued permits, or none at all."""
    outcome = await ActivityEnvironment().run(
        wire.activity, invocation({"to": "Robin", "amount": 50}, None)
    )
    assert outcome.result == "wired 50 to Robin" and SEEN == [None]


# --- the turn's side: the approval's permit and edits reach the tool and the conversation


PROPOSED = {"payee": "ACME", "amount": 50.0}


def approved(payload: dict[str, Any], decided_by: list[str], granted: Permit | None) -> Answer:
    return Answer(
        interrupt=Interrupt(id="int-1", reason="tool_call", tool_call_id="tc-1"),
        status="resolved",
        payload=payload,
        decided_by=decided_by,
        permit=granted,
    )


async def settle(thread: Thread, answer: Answer) -> str:
    """Ask ``pay_invoice``'s approval, answer it, resume; the call's result."""

    def calls() -> list[ToolCallView]:
        return [ToolCallView("tc-1", "pay_invoice", dict(PROPOSED))]

    await thread.asked(lambda ctx: ctx.run_tools(calls()))
    thread.answer(answer)
    [content] = await thread.turn(lambda ctx: ctx.run_tools(calls()))
    assert isinstance(content, str)
    return content


async def test_an_edited_approval_runs_under_its_permit_and_says_who_changed_what(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = offline(monkeypatch)
    thread = Thread(PAYMENTS)
    edited = {"payee": "ACME", "amount": 80}
    granted = permit(edited)

    content = await settle(
        thread, approved({"approved": True, "editedArgs": edited}, ["bob"], granted)
    )

    [ran] = started
    assert ran.arguments == edited and ran.permit == granted
    shown = json.loads(content)
    assert shown["editedArgs"] == edited and shown["editedBy"] == ["bob"]
    assert shown["result"]["amount"] == 80 and shown["result"]["approvers"] == ["bob"]
    # What the client is sent and what the model reads next say the same.
    [message] = [m for m in thread.host.messages if isinstance(m, ToolMessage)]
    assert message.content == content
    assert thread.state.state["payments"] == [
        {
            "toolCallId": "tc-1",
            "payee": "ACME",
            "amount": 80.0,
            "paymentId": shown["result"]["paymentId"],
            "approvers": ["bob"],
        }
    ]


async def test_an_unedited_approval_runs_under_its_permit_and_reports_the_result_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = offline(monkeypatch)
    thread = Thread(PAYMENTS)
    granted = permit(PROPOSED)

    # editedArgs equal to the proposal (50 for 50.0) is no edit; the permit binds them.
    content = await settle(
        thread,
        approved({"approved": True, "editedArgs": {"payee": "ACME", "amount": 50}}, ["bob"], None),
    )
    assert "editedArgs" not in json.loads(content)

    thread = Thread(PAYMENTS)
    content = await settle(thread, approved({"approved": True}, ["alice"], granted))
    assert started[-1].permit == granted
    assert json.loads(content)["status"] == "paid"


async def test_a_denied_approval_runs_nothing_and_issues_no_permit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = offline(monkeypatch)
    thread = Thread(PAYMENTS)

    content = await settle(thread, approved({"approved": False}, ["bob"], None))

    assert content == "Not run: the user denied it."
    assert started == [] and "payments" not in thread.state.state
