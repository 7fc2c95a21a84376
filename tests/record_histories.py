"""Record the histories of representative threads into ``tests/histories/``.

``tests/test_replay.py`` replays every recorded history against the current workflow
code, so a change that would break threads paused under the recorded code fails the
build. Record again (``make histories``, which replaces every file) only for a change
meant to be incompatible, once no thread recorded so can still be running; until then,
guard it as ``tests/upgrade/`` shows (``docs/operations.md``).

Each scenario runs through the real gateway on a fresh dev server; the file is named
``<scenario>.<n>.json``, one per workflow run of the thread, and
``<scenario>.<agent>.<n>.json``, one per workflow run of each of its sub-agent runs (a
child workflow, ``workflows/subagent.py``). They are recorded without encryption,
whatever ``AGUI_PAYLOAD_KEYS`` says, so a reviewer can read them; the replay of an
encrypted history differs from theirs only in the codec, which passes plaintext through.

``python -m tests.record_histories <scenario> ...`` (``make histories ONLY="..."``)
records only the scenarios named, replacing only their files, so that adding a scenario
leaves the others' histories as they were.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory

from settings import Settings
from tests.helpers import LONG_LIVED as LONG_LIVED_RUNS
from tests.helpers import (
    EchoingClient,
    Stack,
    eventually,
    new_thread,
    post_run,
    run_input,
    serve_stack,
    start_dev_server,
    workflow_run_histories,
)
from tests.treasurer import TREASURER
from workflows.agents import EXAMPLES
from workflows.sdk import AgentDefinition
from workflows.thread_ids import workflow_id_for

HISTORIES = Path(__file__).parent / "histories"
AGENTS: tuple[AgentDefinition, ...] = (*EXAMPLES, TREASURER)
"""The agents of the recorded threads: the examples, and ``treasurer``, whose sub-agent
run waits on a question of its own (none of the examples' does)."""

Scenario = Callable[[Stack, str], Awaitable[None]]


async def _interrupts(
    stack: Stack, thread_id: str, text: str, agent: str = "demo", **extra: Any
) -> list[Any]:
    events = await post_run(stack.http, agent, run_input(thread_id, "r1", text, **extra))
    interrupts: list[Any] = events[-1]["outcome"]["interrupts"]
    return interrupts


async def _resume(
    stack: Stack, thread_id: str, entries: list[dict[str, Any]], agent: str = "demo"
) -> None:
    body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": entries}
    await post_run(stack.http, agent, body)


def _answer(interrupt: dict[str, Any], payload: Any) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]


async def chat(stack: Stack, thread_id: str) -> None:
    """A run without interrupts: the model activity answers."""
    await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))


async def approval_with_edits(stack: Stack, thread_id: str) -> None:
    """An approval resolved with edited arguments: the email goes out (local activity)."""
    (approval,) = await _interrupts(stack, thread_id, "mail ann@example.com")
    edited = {"to": "bob@example.com", "subject": "Edited", "body": "Hello Bob"}
    payload = {"approved": True, "editedArgs": edited}
    await _resume(
        stack,
        thread_id,
        [{"interruptId": approval["id"], "status": "resolved", "payload": payload}],
    )


async def denied_cancelled_released(stack: Stack, thread_id: str) -> None:
    """Three interrupts in one run: a denied approval, a cancelled yes/no, a policy hold."""
    email, confirm, hold = await _interrupts(stack, thread_id, "mail a@example.com confirm policy")
    await _resume(
        stack,
        thread_id,
        [
            {"interruptId": email["id"], "status": "resolved", "payload": {"approved": False}},
            {"interruptId": confirm["id"], "status": "cancelled"},
            {"interruptId": hold["id"], "status": "resolved"},
        ],
    )


async def form_expired(stack: Stack, thread_id: str) -> None:
    """A form that expires with nobody connected, then a client cancels it anyway."""
    (form,) = await _interrupts(
        stack, thread_id, "quarterly", forwardedProps={"expiresInSeconds": 1}
    )

    async def expired() -> bool:
        thread = (await stack.http.get(f"/threads/{thread_id}")).json()
        return thread["status"] == "idle"

    await eventually(expired, what="the form to expire")
    await _resume(stack, thread_id, [{"interruptId": form["id"], "status": "cancelled"}])


async def form_answered(stack: Stack, thread_id: str) -> None:
    """A form with the default three-day deadline (and its reminders), answered in time."""
    (form,) = await _interrupts(stack, thread_id, "quarterly")
    filing = {"quarter": "Q3", "year": 2026, "revenue": 1.5}
    await _resume(
        stack, thread_id, [{"interruptId": form["id"], "status": "resolved", "payload": filing}]
    )


async def operator_resumed(stack: Stack, thread_id: str) -> None:
    """An approval an operator gives with ``operator_resume``, and one rejected signal."""
    (approval,) = await _interrupts(stack, thread_id, "mail ann@example.com")
    assert stack.client is not None
    handle = stack.client.get_workflow_handle(workflow_id_for(thread_id))
    entry = {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": 1}}
    await handle.signal("operator_resume", {"resume": [entry], "operator": "eve"})
    entry["payload"] = {"approved": True}
    await handle.execute_update("operator_resume", {"resume": [entry], "operator": "bob"})


async def files_trusted(stack: Stack, thread_id: str) -> None:
    """SDK: an ungated tool, then a hook's question answered "trust"; a later turn on the
    thread deletes without asking."""
    (question,) = await _interrupts(stack, thread_id, "clean /tmp/a.log", agent="files")
    await _resume(stack, thread_id, _answer(question, "t"), agent="files")
    body = run_input(thread_id, "r3", "clean /tmp/a.log", "and /tmp/b")
    await post_run(stack.http, "files", body)


async def transfer_restarted(stack: Stack, thread_id: str) -> None:
    """SDK: a tool asks from inside, then runs again with the answer."""
    (question,) = await _interrupts(stack, thread_id, "transfer 50 to Robin", agent="transfer")
    await _resume(stack, thread_id, _answer(question, {"approved": True}), agent="transfer")


async def clarify_chosen(stack: Stack, thread_id: str) -> None:
    """SDK: an interrupt-only tool; its answer is the tool's result."""
    (question,) = await _interrupts(stack, thread_id, "book a table", agent="clarify")
    await _resume(stack, thread_id, _answer(question, "19:00"), agent="clarify")


async def treasurer_transfer_approved(stack: Stack, thread_id: str) -> None:
    """Sub-agents: a sub-agent tool hands the transfer to the transfer agent, whose tool
    asks from inside; its child workflow continues as new and waits, and the approval
    reaches it through the thread (its tool runs again with it)."""
    (question,) = await _interrupts(stack, thread_id, "transfer 50 to Robin", agent="treasurer")
    await _resume(stack, thread_id, _answer(question, {"approved": True}), agent="treasurer")


async def ops_cleanup_approved(stack: Stack, thread_id: str) -> None:
    """Sub-agents: the inspector's child workflow lists old resources, the hook before
    the cleanup asks (the thread waits, the cleanup not started), and the approval of a
    shorter list starts the cleanup's child workflow."""
    (approval,) = await _interrupts(stack, thread_id, "clean up old resources", agent="ops")
    payload = {"approved": True, "resources": ["disk-scratch-2024", "snapshot-db-nightly-03"]}
    await _resume(stack, thread_id, _answer(approval, payload), agent="ops")


async def state_echoed(stack: Stack, thread_id: str) -> None:
    """Two approvals on a client that echoes the thread's messages and state, as
    ``@ag-ui/client`` does: the second's runs leave out the state the thread has
    (``workflows/known_state.py``) and carry their replies' snapshots as patches."""
    client = EchoingClient(stack.http, thread_id)
    await client.mail("ann@example.com")
    await client.mail("bob@example.com")


SCENARIOS: dict[str, Scenario] = {
    scenario.__name__: scenario
    for scenario in (
        chat,
        approval_with_edits,
        denied_cancelled_released,
        form_expired,
        form_answered,
        operator_resumed,
        files_trusted,
        transfer_restarted,
        clarify_chosen,
        ops_cleanup_approved,
        treasurer_transfer_approved,
        state_echoed,
    )
}
"""Scenarios on threads as the engine runs them: continued as new after every run."""
LONG_LIVED: dict[str, Scenario] = {
    "long_lived_approval_with_edits": approval_with_edits,
    "long_lived_transfer_restarted": transfer_restarted,
    "long_lived_state_echoed": state_echoed,
}
"""Scenarios on threads whose runs share one workflow run (``tests.helpers.LONG_LIVED``)."""


async def _record(client: Client, stack: Stack, name: str, scenario: Scenario) -> None:
    thread_id = new_thread()
    await scenario(stack, thread_id)
    await _write_runs(client, workflow_id_for(thread_id), name)
    thread = (await stack.http.get(f"/threads/{thread_id}")).json()
    agents = [record["agent"] for record in thread["subagents"]]
    # One sub-agent run per agent, so that its files can be named for its agent.
    assert len(agents) == len(set(agents)), agents
    for record in thread["subagents"]:
        await _write_runs(
            client,
            record["subagentRunId"],
            f"{name}.{record['agent']}",
            ended=record["status"] not in ("running", "waiting"),
        )


async def _write_runs(client: Client, workflow_id: str, name: str, ended: bool = False) -> None:
    """Write the history of each run of ``workflow_id`` to ``<name>.<n>.json``, once the
    workflow has closed (``ended``: a sub-agent run that answered) or its latest run
    has had its first workflow task (a history that is only a start event gives the
    replayer nothing to run)."""
    handle = client.get_workflow_handle(workflow_id)

    async def settled() -> bool:
        if ended:
            return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING
        history = await handle.fetch_history()
        return any(
            event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
            for event in history.events
        )

    await eventually(settled, what=f"the latest run of {workflow_id} to settle")
    number = 0
    async for _, events in workflow_run_histories(client, workflow_id):
        number += 1
        history = json.loads(WorkflowHistory(workflow_id, events).to_json())
        path = HISTORIES / f"{name}.{number}.json"
        path.write_text(json.dumps(history, indent=1) + "\n")
        print(f"recorded {path.relative_to(HISTORIES.parent.parent)}")


async def main(only: Sequence[str] = ()) -> None:
    """Record every scenario, replacing every history; or only the scenarios ``only``
    names, replacing only theirs."""
    unknown = sorted(set(only) - set(SCENARIOS) - set(LONG_LIVED))
    if unknown:
        raise SystemExit(f"No scenario named {', '.join(unknown)}.")
    HISTORIES.mkdir(exist_ok=True)
    for old in HISTORIES.glob("*.json"):
        if not only or old.name.split(".")[0] in only:
            old.unlink()
    plaintext = Settings(payload_keys=None)
    server = await start_dev_server(settings=plaintext)
    try:
        async with serve_stack(server.client, agents=AGENTS, payload_keys=None) as stack:
            for name, scenario in SCENARIOS.items():
                if not only or name in only:
                    await _record(server.client, stack, name, scenario)
        async with serve_stack(
            server.client,
            agents=AGENTS,
            payload_keys=None,
            continue_as_new_after_runs=LONG_LIVED_RUNS,
        ) as stack:
            for name, scenario in LONG_LIVED.items():
                if not only or name in only:
                    await _record(server.client, stack, name, scenario)
    finally:
        await server.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
    # The server has shut down. Skip interpreter teardown: the Temporal core's native
    # threads can outlive it and abort CPython's finalization (SIGABRT), failing make.
    sys.stdout.flush()
    os._exit(0)
