"""The ``transfer`` agent: moves money once the user confirms (Genkit's example).

``transfer_money`` asks for confirmation from inside the tool, then runs again from the
top with the answer (Genkit's *restart*). The answer's schema admits nothing but
``approved``, so a resume cannot change the recipient or the amount. The state it shares
(:class:`TransferState`) is the only state a client may send it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ConfigDict
    from pydantic.alias_generators import to_camel

    from workflows.sdk import (
        AgentContext,
        AgentDefinition,
        Ask,
        ChatReply,
        ChatRequest,
        ProposedCall,
        ScriptedModel,
        ToolCallView,
        ToolInterrupt,
        last_user_text,
        tool,
        tool_context,
        tool_results,
    )

CONFIRMATION: dict[str, object] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
    "additionalProperties": False,
}
REQUEST = re.compile(r"transfer\s+(\d+(?:\.\d+)?)\s+to\s+(\w+)", re.IGNORECASE)


class Transfer(BaseModel):
    """A completed transfer, as the state keeps it."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    to: str
    amount: float
    confirmation_id: str


class TransferState(BaseModel):
    """The state the agent shares, which a client sends back: its completed transfers."""

    model_config = ConfigDict(extra="forbid")

    transfers: list[Transfer] = []


@tool
async def transfer_money(to: str, amount: float) -> dict[str, object]:
    """Transfer ``amount`` to ``to``, once the user has confirmed it."""
    context = tool_context()
    if context.resumed is None:
        raise ToolInterrupt(
            Ask("confirmation", message=f"Transfer {amount:g} to {to}?", response=CONFIRMATION)
        )
    if not context.resumed["approved"]:
        return {"status": "declined"}
    # A stand-in for the bank's API: the id is a function of the idempotency key, so a
    # retried call is the same transfer.
    digest = hashlib.sha256(context.idempotency_key.encode()).hexdigest()[:10]
    return {"status": "completed", "to": to, "amount": amount, "confirmationId": f"tr-{digest}"}


def transfer(request: ChatRequest) -> ChatReply:
    """Call ``transfer_money`` for "transfer <amount> to <name>", then report."""
    results = tool_results(request.messages)
    if results:
        _, content = results[-1]
        try:
            outcome = json.loads(content)
        except ValueError:
            return ChatReply(text=f"No money was moved. {content}")
        if outcome.get("status") == "completed":
            return ChatReply(
                text=f"Sent {outcome['amount']:g} to {outcome['to']}; "
                f"confirmation {outcome['confirmationId']}."
            )
        return ChatReply(text="No money was moved: the transfer was declined.")
    match = REQUEST.search(last_user_text(request.messages))
    if match is None:
        return ChatReply(text='Tell me what to transfer, e.g. "transfer 50 to Robin".')
    arguments = {"to": match[2], "amount": float(match[1])}
    return ChatReply(tool_calls=[ProposedCall(name="transfer_money", arguments=arguments)])


MODEL = ScriptedModel("transfer", transfer)


async def record_transfer(ctx: AgentContext, call: ToolCallView, result: Any) -> None:
    """Keep each completed transfer in the thread's state (``transfers``)."""
    if isinstance(result, dict) and result.get("status") == "completed":
        done = {key: result[key] for key in ("to", "amount", "confirmationId")}
        ctx.state.setdefault("transfers", []).append(done)


TRANSFER = AgentDefinition(
    name="transfer",
    description='Transfers money ("transfer 50 to Robin") after you confirm it.',
    model=MODEL,
    tools=[transfer_money],
    after_tool=[record_transfer],
    state=TransferState,
)
