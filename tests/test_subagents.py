"""Sub-agents: child workflows of the thread, their interrupts asked and answered
through it (``workflows/subagent.py``, ``workflows/delegation.py``). Real gateway, worker
and Temporal server."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import Stack, assert_valid_stream, new_thread, post_run, run_input, types


async def run(stack: Stack, agent: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    events = await post_run(stack.http, agent, body)
    assert_valid_stream(events, body["threadId"])
    return events


def resume(thread_id: str, run_id: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "messages": [], "resume": list(entries)}


def text(events: list[dict[str, Any]], subagent: str | None = None) -> str:
    return "".join(
        e["delta"]
        for e in events
        if e["type"] == "TEXT_MESSAGE_CONTENT" and e.get("subagentRunId") == subagent
    )


async def test_ops_cleans_up_exactly_the_approved_list(stack: Stack) -> None:
    thread_id = new_thread()
    events = await run(stack, "ops", run_input(thread_id, "r1", "clean up old resources"))
    print(json.dumps(events, indent=1)[:6000])
    [interrupt] = events[-1]["outcome"]["interrupts"]
    assert interrupt["subagentRunId"].startswith(f"agui-subagent-{thread_id}-cleanup-")
    found = interrupt["metadata"]["resources"]
    assert found == [
        "disk-scratch-2024",
        "vm-build-runner-7",
        "snapshot-db-nightly-03",
        "bucket-tmp-uploads",
    ]
    chosen = ["disk-scratch-2024", "snapshot-db-nightly-03"]
    entry = {
        "interruptId": interrupt["id"],
        "status": "resolved",
        "payload": {"approved": True, "resources": chosen},
    }
    done = await run(stack, "ops", resume(thread_id, "r2", entry))
    print(json.dumps(done, indent=1)[:8000])
    assert done[-1]["outcome"] == {"type": "success"}
    assert "Deleted 2 resources: disk-scratch-2024, snapshot-db-nightly-03." in text(done)
    assert "SUBAGENT_STARTED" in types(done)
