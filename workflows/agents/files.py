"""The ``files`` agent: cleans up files, asking before it deletes (Strands' example).

A hook of ``delete_files``'s own gates it: ``y`` runs it, ``n`` cancels it, ``t`` runs it
and trusts the tool for the rest of the thread (a remembered decision, so later
deletions on the thread do not ask).

The tools simulate a file system, so the example runs anywhere and deletes nothing: a
path's size is derived from its name. The state it shares (:class:`FilesState`) is the
only state a client may send it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ConfigDict

    from workflows.sdk import (
        AgentContext,
        AgentDefinition,
        ChatReply,
        ChatRequest,
        ProposedCall,
        ScriptedModel,
        ToolCallView,
        last_user_text,
        tool,
        tool_results,
    )

TRUSTED = "trustedTools"
"""Memory key: the tools the user said to stop asking about."""


class FilesState(BaseModel):
    """The state the agent shares, which a client sends back: the paths it deleted."""

    model_config = ConfigDict(extra="forbid")

    deleted: list[str] = []


@tool
async def inspect_files(paths: list[str]) -> list[dict[str, object]]:
    """Report the size of each file, before deciding what to delete."""
    return [{"path": path, "bytes": _size(path)} for path in paths]


async def confirm_delete(ctx: AgentContext, call: ToolCallView) -> None:
    """Ask before ``delete_files`` runs, unless the user trusts it on this thread."""
    trusted: list[str] = ctx.memory.get(TRUSTED, [])
    if call.name in trusted:
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
    if isinstance(result, dict):
        ctx.state.setdefault("deleted", []).extend(result["deleted"])


@tool(before=[confirm_delete], after=[record_deleted])
async def delete_files(paths: list[str]) -> dict[str, list[str]]:
    """Delete the files (simulated: nothing on disk is touched)."""
    return {"deleted": paths}


def _size(path: str) -> int:
    return int(hashlib.sha256(path.encode()).hexdigest()[:4], 16)


def paths_in(text: str) -> list[str]:
    """Every token of ``text`` that looks like a path (contains ``/``), in order."""
    tokens = (token.strip(".,;:!?'\"()") for token in text.split())
    return [token for token in tokens if "/" in token]


def clean_up(request: ChatRequest) -> ChatReply:
    """Inspect the paths the user named, then delete them; report what happened."""
    results = tool_results(request.messages)
    paths = paths_in(last_user_text(request.messages))
    if not paths:
        return ChatReply(text="Name the files to clean up, e.g. /tmp/old.log.")
    if not results:
        return ChatReply(
            tool_calls=[ProposedCall(name="inspect_files", arguments={"paths": paths})]
        )
    name, content = results[-1]
    if name == "inspect_files":
        return ChatReply(tool_calls=[ProposedCall(name="delete_files", arguments={"paths": paths})])
    try:
        deleted = json.loads(content)["deleted"]
    except (ValueError, KeyError, TypeError):
        return ChatReply(text=f"Nothing was deleted. {content}")
    return ChatReply(text=f"Deleted {', '.join(deleted)}.")


MODEL = ScriptedModel("files", clean_up)


FILES = AgentDefinition(
    name="files",
    description="Cleans up the files you name (paths contain '/'), asking before it deletes.",
    model=MODEL,
    tools=[inspect_files, delete_files],
    state=FilesState,
)
