"""The ``transfer`` agent: moves money once the user confirms (Genkit's example).

The confirmation is asked by the ``transfer_money`` tool itself, which then runs again
with the answer (``activities/transfer.py``).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import transfer
    from workflows.sdk import AgentContext, AgentDefinition, ToolCallView


async def record_transfer(ctx: AgentContext, call: ToolCallView, result: Any) -> None:
    """Keep each completed transfer in the thread's state (``transfers``)."""
    if isinstance(result, dict) and result.get("status") == "completed":
        done = {key: result[key] for key in ("to", "amount", "confirmationId")}
        ctx.state.setdefault("transfers", []).append(done)


TRANSFER = AgentDefinition(
    name="transfer",
    description='Transfers money ("transfer 50 to Robin") after you confirm it.',
    model=transfer.MODEL,
    tools=[transfer.transfer_money],
    after_tool=[record_transfer],
)
