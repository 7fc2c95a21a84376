"""The ``files`` example's tools and scripted model (Strands' file-cleanup example).

The tools simulate a file system, so the example runs anywhere and deletes nothing: a
path's size is derived from its name.
"""

from __future__ import annotations

import hashlib
import json

from activities.chat import (
    ChatReply,
    ChatRequest,
    ProposedCall,
    ScriptedModel,
    last_user_text,
    tool_results,
)
from activities.tooling import tool


@tool
async def inspect_files(paths: list[str]) -> list[dict[str, object]]:
    """Report the size of each file, before deciding what to delete."""
    return [{"path": path, "bytes": _size(path)} for path in paths]


@tool
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
