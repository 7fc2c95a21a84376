"""Who may answer reaches the thread wherever an agent asks: an approval (with the call
it binds), a hook, ``interrupt_all``, an interrupt-only tool, a tool's own question.

The turns run without a workflow (``tests/unit/turns.py``); what is checked is the
``Question`` the thread receives, whose ``approvers`` it resolves into
``Interrupt.metadata.approvers``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.turns import NOW, Thread, offline
from workflows.agents.payments import APPROVAL, PAYMENTS, pay_invoice, question
from workflows.approvers import Approvers, BoundCall, Escalation
from workflows.sdk import (
    AgentContext,
    AgentDefinition,
    Approval,
    Ask,
    ChatReply,
    ScriptedModel,
    ToolCallView,
    ToolInterrupt,
    interrupt_tool,
    tool,
)

FINANCE = Approvers(groups=["finance"], exclude_requester=True)
CAROL = Approvers(users=["carol"])
BOARD = Approvers(groups=["board"], needed=2)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return offline(monkeypatch)


def pay(amount: float) -> ToolCallView:
    return ToolCallView("tc-1", "pay_invoice", {"payee": "ACME", "amount": amount})


@pytest.mark.parametrize(
    ("amount", "policy", "message"),
    [
        (50, None, "Pay 50 to ACME?"),
        (100, None, "Pay 100 to ACME?"),
        (250, FINANCE, "Pay 250 to ACME? Needs one approval from finance (not the requester)."),
        (
            20_000,
            Approvers(
                groups=["finance"],
                needed=2,
                exclude_requester=True,
                escalation=Escalation(after=timedelta(days=1), groups=["cfo"]),
            ),
            "Pay 20000 to ACME? Needs two approvals from finance (not the requester); "
            "after 1 day, cfo too.",
        ),
    ],
)
def test_an_approval_asks_under_the_policy_its_arguments_call_for(
    amount: float, policy: Approvers | None, message: str
) -> None:
    call = pay(amount)
    asked = APPROVAL.ask(call, pay_invoice.spec).question(NOW)

    assert asked.approvers == policy
    assert asked.call == BoundCall(name="pay_invoice", arguments=call.arguments)
    assert asked.message == question(call) == message
    # The thread checks an edit against the policy its arguments would call for.
    assert PAYMENTS.approvers_for(asked.call, {"payee": "ACME", "amount": 5_000}) == FINANCE


@pytest.mark.parametrize("amount", ["250", None, float("nan"), True])
def test_an_amount_that_is_not_a_number_gets_the_strictest_policy(amount: Any) -> None:
    policy = APPROVAL.approvers_for({"payee": "ACME", "amount": amount})
    assert policy is not None and policy.needed == 2


async def test_the_default_loop_asks_the_approval_with_its_policy_and_the_call(
    started: list[Any],
) -> None:
    thread = Thread(PAYMENTS)
    [asked] = await thread.asked(lambda ctx: ctx.run_tools([pay(250)]))

    assert (asked.reason, asked.tool_call_id) == ("tool_call", "tc-1")
    assert asked.approvers == FINANCE
    assert asked.call == BoundCall(name="pay_invoice", arguments={"payee": "ACME", "amount": 250})
    assert started == [], "nothing ran before the approval"


@tool
async def lookup(city: str) -> str:
    """Look a city up."""
    return city


@tool
async def transfer(amount: float) -> str:
    """Transfer, once the board agrees (it asks from inside)."""
    raise ToolInterrupt(Ask("confirmation", response=bool, approvers=BOARD))


@interrupt_tool
def escalate(topic: str) -> Ask[str]:
    """Ask the on-call person."""
    return Ask("input_required", message=topic, response=str, approvers=CAROL)


async def ask_carol(ctx: AgentContext, call: ToolCallView) -> None:
    """A hook that asks someone other than the owner before a lookup."""
    if call.name == "lookup":
        await ctx.interrupt(
            "tool_call", message="Look it up?", response=bool, tool_call_id=call.id, approvers=CAROL
        )


AGENT = AgentDefinition(
    name="asks",
    description="asks",
    model=ScriptedModel("asks", lambda _: ChatReply(text="")),
    tools=[lookup, transfer, escalate],
    before_tool=[ask_carol],
)


async def test_hooks_interrupt_only_tools_and_tools_ask_under_their_policies(
    started: list[Any],
) -> None:
    calls = [
        ToolCallView("tc-1", "lookup", {"city": "Oslo"}),
        ToolCallView("tc-2", "escalate", {"topic": "Disk full?"}),
        ToolCallView("tc-3", "transfer", {"amount": 5}),
    ]
    asked = await Thread(AGENT).asked(lambda ctx: ctx.run_tools(calls))

    by_call = {q.tool_call_id: q for q in asked}
    assert sorted(by_call) == ["tc-1", "tc-2", "tc-3"]
    assert by_call["tc-1"].approvers == CAROL and by_call["tc-1"].message == "Look it up?"
    assert by_call["tc-2"].approvers == CAROL and by_call["tc-2"].message == "Disk full?"
    # The tool's question crossed back from its activity as JSON, policy and all.
    assert by_call["tc-3"].approvers == BOARD
    assert [type(arg).__name__ for arg in started] == ["ToolInvocation"]
    assert all(q.call is None for q in asked), "only an approval binds a call"


async def test_interrupt_all_asks_each_question_under_its_own_policy(started: list[Any]) -> None:
    asks = [
        Ask("confirmation", response=bool, approvers=CAROL),
        Ask("input_required", response=str),
    ]
    asked = await Thread(AGENT).asked(lambda ctx: ctx.interrupt_all(asks))
    assert [q.approvers for q in asked] == [CAROL, None]


def test_an_approval_with_a_fixed_policy_asks_under_it_whatever_the_arguments() -> None:
    approval = Approval(approvers=CAROL)
    asked = approval.ask(ToolCallView("tc-9", "lookup", {"city": "Oslo"}), lookup.spec)
    assert asked.approvers == CAROL
    assert asked.call == BoundCall(name="lookup", arguments={"city": "Oslo"})
