"""The ``files`` agent: cleans up files, asking before it deletes (Strands' example).

A before-tool hook gates ``delete_files``: ``y`` runs it, ``n`` cancels it, ``t`` runs it
and trusts the tool for the rest of the thread (a remembered decision, so later
deletions on the thread do not ask).
"""

from __future__ import annotations

from typing import Any, Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import files
    from workflows.sdk import AgentContext, AgentDefinition, ToolCallView

TRUSTED = "trustedTools"
"""Memory key: the tools the user said to stop asking about."""


async def confirm_delete(ctx: AgentContext, call: ToolCallView) -> None:
    """Ask before ``delete_files`` runs, unless the user trusts it on this thread."""
    trusted: list[str] = ctx.memory.get(TRUSTED, [])
    if call.name != "delete_files" or call.name in trusted:
        return
    reply = await ctx.interrupt(
        "tool_call",
        message=f"Delete {', '.join(call.arguments['paths'])}? "
        "y = yes, n = no, t = yes, and do not ask again on this thread.",
        response=Literal["y", "n", "t"],
        tool_call_id=call.id,
    )
    if reply.value == "t":
        ctx.memory[TRUSTED] = sorted({*trusted, call.name})
    elif reply.value != "y":
        call.cancel("The user chose not to delete the files.")


async def record_deleted(ctx: AgentContext, call: ToolCallView, result: Any) -> None:
    """Keep the deleted paths in the thread's state (``deleted``)."""
    if call.name == "delete_files" and isinstance(result, dict):
        ctx.state.setdefault("deleted", []).extend(result["deleted"])


FILES = AgentDefinition(
    name="files",
    description="Cleans up the files you name (paths contain '/'), asking before it deletes.",
    model=files.MODEL,
    tools=[files.inspect_files, files.delete_files],
    before_tool=[confirm_delete],
    after_tool=[record_deleted],
)
