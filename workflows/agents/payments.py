"""The ``payments`` agent: pays invoices, with approvers chosen by the amount.

``pay_invoice`` is an ordinary tool whose :class:`Approval` names who may approve a call
as a function of its arguments (:func:`approvers_for`): the thread's owner for small
amounts, someone in ``finance`` other than the requester above 100, two of them above
10000, and from a day on the ``cfo`` too. An approver may correct the call
(``editedArgs``); an edit that would need stricter approvers than the question was
asked under is refused (``POLICY_EXCEEDED``). The approved call runs under the
approval's permit: the tool sees who approved (``tool_context().permit``) and the
activity refuses arguments other than those approved (``PERMIT_MISMATCH``).

The state it shares (:class:`PaymentsState`) is the only state a client may send it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import AssistantMessage, Message, ToolMessage, UserMessage
    from pydantic import BaseModel, ConfigDict, Field
    from pydantic.alias_generators import to_camel

    from workflows.sdk import (
        AgentContext,
        AgentDefinition,
        Approval,
        Approvers,
        ChatReply,
        ChatRequest,
        Escalation,
        ProposedCall,
        ScriptedModel,
        ToolCallView,
        last_user_text,
        tool,
        tool_context,
    )

REQUEST = re.compile(r"\bpay\s+(\d+(?:\.\d+)?)\s+to\s+(\w+)", re.IGNORECASE)


def approvers_for(arguments: dict[str, Any]) -> Approvers | None:
    """Who approves paying ``arguments["amount"]``: the owner up to 100, one of finance
    (not the requester) up to 10000, two of finance above, with the CFO joining after a
    day. The policy fails closed."""
    amount = _amount(arguments)  # not a number: infinity, the strictest policy
    if amount <= 100:
        return None  # the owner approves their own small payment
    if amount <= 10_000:
        return Approvers(groups=["finance"], exclude_requester=True)
    return Approvers(
        groups=["finance"],
        needed=2,
        exclude_requester=True,
        escalation=Escalation(after=timedelta(days=1), groups=["cfo"]),
    )


def _amount(arguments: dict[str, Any]) -> float:
    amount = arguments.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int | float) or math.isnan(amount):
        return math.inf
    return float(amount)


def question(call: ToolCallView) -> str:
    """What the approvers are asked: the payment, and whose approval it waits for."""
    asked = f"Pay {_shown(call.arguments.get('amount'))} to {call.arguments.get('payee')}?"
    policy = approvers_for(call.arguments)
    if policy is None:
        return asked
    count = {1: "one approval", 2: "two approvals"}.get(policy.needed, f"{policy.needed} approvals")
    who = f"{count} from {', '.join(policy.groups)}"
    if policy.exclude_requester:
        who += " (not the requester)"
    escalation = policy.escalation
    if escalation is not None:
        days = escalation.after / timedelta(days=1)
        after = f"{_shown(days)} day{'' if days == 1 else 's'}"
        who += f"; after {after}, {', '.join(escalation.groups)} too"
    return f"{asked} Needs {who}."


APPROVAL = Approval(edits=True, approvers=approvers_for, message=question)


@tool(approval=APPROVAL)
async def pay_invoice(payee: str, amount: float) -> dict[str, object]:
    """Pay ``amount`` to ``payee``, once the approvers the amount calls for approve it."""
    context = tool_context()
    # A stand-in for the payment provider: the id is a function of the idempotency key,
    # so a retried call is the same payment. A real provider would also be handed who
    # approved it, from the permit.
    digest = hashlib.sha256(context.idempotency_key.encode()).hexdigest()[:10]
    approvers = context.permit.approvers if context.permit is not None else []
    return {
        "status": "paid",
        "payee": payee,
        "amount": amount,
        "paymentId": f"pay-{digest}",
        "approvers": approvers,
    }


class Payment(BaseModel):
    """A payment made, as the state keeps it."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    tool_call_id: str
    payee: str
    amount: float
    payment_id: str
    approvers: list[str] = Field(default_factory=list)


class PaymentsState(BaseModel):
    """The state the agent shares, which a client sends back: the payments it made."""

    model_config = ConfigDict(extra="forbid")

    payments: list[Payment] = Field(default_factory=list)


async def record_payment(ctx: AgentContext, call: ToolCallView, result: Any) -> None:
    """Keep each payment made in the thread's state (``payments``), once per tool call:
    hooks run again when their turn resumes."""
    if not isinstance(result, dict) or result.get("status") != "paid":
        return
    payments: list[dict[str, Any]] = ctx.state.setdefault("payments", [])
    if any(payment["toolCallId"] == call.id for payment in payments):
        return
    payment = Payment(
        tool_call_id=call.id,
        payee=result["payee"],
        amount=result["amount"],
        payment_id=result["paymentId"],
        approvers=result["approvers"],
    )
    payments.append(payment.model_dump(mode="json", by_alias=True))


def pay(request: ChatRequest) -> ChatReply:
    """Propose ``pay_invoice`` for "pay <amount> to <payee>", then say what came of it."""
    settled = _settled(request.messages)
    if settled is not None:
        return ChatReply(text=_report(*settled))
    match = REQUEST.search(last_user_text(request.messages))
    if match is None:
        return ChatReply(text='Tell me what to pay, e.g. "pay 250 to ACME".')
    arguments = {"payee": match[2], "amount": float(match[1])}
    return ChatReply(tool_calls=[ProposedCall(name="pay_invoice", arguments=arguments)])


def _settled(messages: list[Message]) -> tuple[dict[str, Any], str] | None:
    """Since the newest user message: the arguments the newest tool result's call was
    proposed with, and that result."""
    result: ToolMessage | None = None
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return None
        if result is None and isinstance(message, ToolMessage):
            result = message
        if result is not None and isinstance(message, AssistantMessage):
            for call in message.tool_calls or []:
                if call.id == result.tool_call_id:
                    return json.loads(call.function.arguments), str(result.content)
    return None


def _report(proposed: dict[str, Any], content: str) -> str:
    """What was paid (and who changed it before approving), or that nothing was."""
    try:
        outcome = json.loads(content)
    except ValueError:
        # A call that did not run: "Not run: the user denied it." and the like.
        return f"Nothing was paid: {content.removeprefix('Not run: ')}"
    edited = isinstance(outcome, dict) and "editedArgs" in outcome
    result = outcome["result"] if edited else outcome
    if not isinstance(result, dict) or result.get("status") != "paid":
        why = result.get("error", result) if isinstance(result, dict) else result
        return f"Nothing was paid: {why}"
    text = f"Paid {_shown(result['amount'])} to {result['payee']} (payment {result['paymentId']})"
    if result["approvers"]:
        text += f", approved by {', '.join(result['approvers'])}"
    text += "."
    if edited:
        who = ", ".join(outcome["editedBy"]) or "The approver"
        changes = [
            f"the {key} from {_shown(proposed.get(key))} to {_shown(value)}"
            for key, value in outcome["editedArgs"].items()
            if proposed.get(key) != value
        ]
        text += f" {who} changed {' and '.join(changes)} before approving."
    return text


def _shown(value: Any) -> str:
    """A value as a sentence shows it: whole amounts without a trailing ``.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


MODEL = ScriptedModel("payments", pay)


PAYMENTS = AgentDefinition(
    name="payments",
    description=(
        'Pays invoices ("pay 250 to ACME"): you approve up to 100, finance above it '
        "(two of them above 10000, the CFO too after a day)."
    ),
    model=MODEL,
    tools=[pay_invoice],
    after_tool=[record_payment],
    state=PaymentsState,
)
