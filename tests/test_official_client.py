"""The official AG-UI TypeScript client (``@ag-ui/client`` ``HttpAgent``) drives the gateway.

Each test writes a spec for ``tests/node/run_agent.mjs``, runs it with Node, and asserts on
what the client saw. The script exits non-zero whenever the client's own checks
(``verifyEvents``, its interrupt enforcement) reject a stream.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from gateway.sent_messages import Resent
from tests.chat_server import ChatServer, Reply, ScriptedCall
from tests.helpers import Stack, bearer, new_thread

NODE_DIR = Path(__file__).resolve().parent / "node"


async def drive(
    stack: Stack, tmp_path: Path, steps: list[dict[str, Any]], agent: str = "demo"
) -> dict[str, Any]:
    """Run ``steps`` on a new thread with ``HttpAgent``; return the script's report."""
    spec = {
        "url": f"{stack.http.base_url}/agents/{agent}",
        # HttpAgent sends these with every request: the gateway needs a bearer token.
        "headers": dict(bearer()),
        "threadId": new_thread(),
        "timeoutMs": 30000,
        "steps": steps,
    }
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    process = await asyncio.create_subprocess_exec(
        "node",
        str(NODE_DIR / "run_agent.mjs"),
        str(spec_file),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    sys.stderr.write(stderr.decode())
    assert process.returncode == 0, stderr.decode()
    report: dict[str, Any] = json.loads(stdout)
    for step in report["steps"]:
        assert step["events"][-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    return report


def user(message_id: str, text: str) -> dict[str, str]:
    return {"id": message_id, "role": "user", "content": text}


async def test_http_agent_runs_pauses_and_resumes_with_build_resume_array(
    stack: Stack, tmp_path: Path, resent: list[Resent | None]
) -> None:
    report = await drive(
        stack,
        tmp_path,
        [
            {"runId": "r1", "messages": [user("m1", "mail a@b.com, quarterly please")]},
            {
                "runId": "r2",
                "messages": [],
                "respond": [
                    {"status": "resolved", "payload": {"approved": True}},
                    {
                        "status": "resolved",
                        "payload": {"quarter": "Q2", "year": 2026, "revenue": 12.5},
                    },
                ],
            },
        ],
    )

    first, second = report["steps"]
    assert [i["reason"] for i in first["pendingInterrupts"]] == ["tool_call", "input_required"]
    assert first["events"][-1]["outcome"]["type"] == "interrupt"
    assert second["pendingInterrupts"] == []
    assert second["events"][-1]["outcome"] == {"type": "success"}
    assert second["warnings"] == []
    assert report["state"]["outbox"][0]["to"] == "a@b.com"
    assert report["state"]["filings"] == [{"quarter": "Q2", "year": 2026, "revenue": 12.5}]
    # The client sent the run's snapshot back as the gateway wrote it: read after it.
    assert [each is not None for each in resent] == [False, True]


async def test_http_agent_sees_an_invalid_answer_as_a_run_error_then_recovers(
    stack: Stack, tmp_path: Path
) -> None:
    report = await drive(
        stack,
        tmp_path,
        [
            {"runId": "r1", "messages": [user("m1", "please confirm")]},
            {"runId": "r2", "messages": [], "respond": [{"status": "resolved", "payload": "yes"}]},
            {"runId": "r3", "messages": [], "respond": [{"status": "resolved", "payload": True}]},
        ],
    )

    _, rejected, accepted = report["steps"]
    assert rejected["events"][-1]["type"] == "RUN_ERROR"
    assert rejected["events"][-1]["code"] == "INVALID_PAYLOAD"
    assert accepted["events"][-1]["outcome"] == {"type": "success"}
    assert report["messages"][-1]["content"] == "Confirmed."


async def test_a_plain_run_is_accepted_unchanged(stack: Stack, tmp_path: Path) -> None:
    report = await drive(stack, tmp_path, [{"runId": "r1", "messages": [user("m1", "hello")]}])

    [step] = report["steps"]
    assert step["events"] == step["wireEvents"]
    assert step["warnings"] == []
    assert report["messages"][-1]["content"] == "You said: hello"


async def test_http_agent_drives_a_hook_question_of_an_sdk_agent(
    stack: Stack, tmp_path: Path
) -> None:
    report = await drive(
        stack,
        tmp_path,
        [
            {"runId": "r1", "messages": [user("m1", "clean /tmp/a.log")]},
            {"runId": "r2", "messages": [], "respond": [{"status": "resolved", "payload": "y"}]},
        ],
        agent="files",
    )

    first, second = report["steps"]
    assert [e["type"] for e in first["events"]].count("TOOL_CALL_RESULT") == 1
    assert [i["reason"] for i in first["pendingInterrupts"]] == ["tool_call"]
    assert second["events"][-1]["outcome"] == {"type": "success"}
    assert first["warnings"] == second["warnings"] == []
    assert report["state"]["deleted"] == ["/tmp/a.log"]


async def test_http_agent_accepts_a_streamed_model_reply_with_text_and_tool_calls(
    llm: tuple[ChatServer, Stack], tmp_path: Path
) -> None:
    server, stack = llm
    server.script(
        Reply(text=["Let me ", "check."], tool_calls=[ScriptedCall("weather", {"city": "Oslo"})]),
        Reply(text=["Sunny ", "in ", "Oslo."]),
    )
    report = await drive(
        stack,
        tmp_path,
        [
            {"runId": "r1", "messages": [user("m1", "weather in Oslo?")]},
            {
                "runId": "r2",
                "messages": [],
                "respond": [{"status": "resolved", "payload": {"approved": True}}],
            },
        ],
        agent="llm",
    )

    first, second = report["steps"]
    wire = [e["type"] for e in first["wireEvents"]]
    # Text first, closed before the tool call starts (AG-UI's order); all accepted.
    assert wire.index("TEXT_MESSAGE_END") < wire.index("TOOL_CALL_START")
    deltas = [e["delta"] for e in first["wireEvents"] if e["type"] == "TOOL_CALL_ARGS"]
    assert json.loads("".join(deltas)) == {"city": "Oslo"}
    assert first["events"] == first["wireEvents"]
    assert first["events"][-1]["outcome"]["type"] == "interrupt"
    assert second["events"][-1]["outcome"] == {"type": "success"}
    assert report["messages"][-1]["content"] == "Sunny in Oslo."


def lifecycle(events: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    """The ``SUBAGENT_*`` events: type, sub-agent run id, outcome (``FINISHED``'s)."""
    return [
        (e["type"], e["subagentRunId"], e.get("outcome", {}).get("type"))
        for e in events
        if e["type"].startswith("SUBAGENT_")
    ]


async def test_http_agent_approves_part_of_a_sub_agents_work_through_the_thread(
    stack: Stack, tmp_path: Path
) -> None:
    chosen = ["disk-scratch-2024", "snapshot-db-nightly-03"]
    approve = {"status": "resolved", "payload": {"approved": True, "resources": chosen}}
    report = await drive(
        stack,
        tmp_path,
        [
            {"runId": "r1", "messages": [user("m1", "clean up old resources")]},
            {"runId": "r2", "messages": [], "respond": [approve]},
        ],
        agent="ops",
    )

    first, second = report["steps"]
    thread_id = first["events"][0]["threadId"]
    # The client accepted both streams as sent: verifyEvents, the sub-agent lifecycle.
    for step in (first, second):
        assert step["events"] == step["wireEvents"]
        assert step["warnings"] == []
    # The question a hook asks before the cleanup runs is the thread's interrupt,
    # marked with the cleanup's sub-agent run, and the client resumed it as one.
    [interrupt] = first["pendingInterrupts"]
    cleanup = interrupt["subagentRunId"]
    assert cleanup.startswith(f"agui-subagent-{thread_id}-cleanup-")
    assert second["resume"] == [{"interruptId": interrupt["id"], **approve}]
    [inspector] = {e.get("subagentRunId") for e in first["events"]} - {None, cleanup}
    assert inspector.startswith(f"agui-subagent-{thread_id}-inspector-")
    assert lifecycle(first["events"]) == [
        ("SUBAGENT_STARTED", inspector, None),
        ("SUBAGENT_FINISHED", inspector, "success"),
        ("SUBAGENT_STARTED", cleanup, None),
        ("SUBAGENT_FINISHED", cleanup, "suspended"),
    ]
    suspended = [e for e in first["events"] if e["type"] == "SUBAGENT_FINISHED"][-1]
    assert suspended["outcome"]["interruptIds"] == [interrupt["id"]]
    assert lifecycle(second["events"]) == [
        ("SUBAGENT_STARTED", cleanup, None),
        ("SUBAGENT_FINISHED", cleanup, "success"),
    ]
    assert second["pendingInterrupts"] == []
    assert second["events"][-1]["outcome"] == {"type": "success"}

    # The client's conversation: the sub-agents' messages, each marked with its run,
    # then the thread's own answer.
    answer = "Deleted 2 resources: disk-scratch-2024, snapshot-db-nightly-03."
    messages = report["messages"]
    assert [(m["role"], m.get("subagentRunId")) for m in messages] == [
        ("user", None),
        ("assistant", inspector),
        ("tool", inspector),
        ("assistant", inspector),
        ("assistant", cleanup),
        ("tool", cleanup),
        ("assistant", cleanup),
        ("assistant", None),
    ]
    [delete] = messages[4]["toolCalls"]
    assert delete["function"]["name"] == "delete_resources"
    assert json.loads(delete["function"]["arguments"]) == {"names": chosen}
    assert json.loads(messages[5]["content"]) == {"deleted": chosen}
    assert messages[6]["content"] == messages[7]["content"] == answer
