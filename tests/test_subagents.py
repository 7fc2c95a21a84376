"""Sub-agents end to end: the ``ops`` example, and the life of sub-agent runs (child
workflows of the thread, ``workflows/subagent.py``): listed with their statuses,
cancelled with their thread, failing into their parent's run. Real gateway, worker and
Temporal server.

The test agents below are served here and by ``tests/test_subagent_interrupts.py``: a
parent (``shop``) whose model hands each line ``<agent>: <task>`` of the user's message
to that sub-agent, all in one batch, and answers with their answers; a parent (``pair``)
that runs one sub-agent twice side by side (a graph); and the sub-agents, each asking
its question its own way.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError

from gateway.streaming import thread_handle
from tests.helpers import (
    TEMPORAL_CLI,
    Stack,
    eventually,
    history_length,
    new_thread,
    post_run,
    run_input,
    serve_stack,
    types,
)
from workflows.approvers import Approvers
from workflows.errors import ErrorCode
from workflows.sdk import (
    AgentDefinition,
    Approval,
    Ask,
    ChatReply,
    ChatRequest,
    Graph,
    GraphResult,
    Node,
    ProposedCall,
    ScriptedModel,
    ToolInterrupt,
    interrupt_tool,
    last_user_text,
    subagent_tool,
    tool,
    tool_context,
    tool_results,
)
from workflows.thread_ids import workflow_id_for

RAN: Counter[str] = Counter()
"""Tool runs, by ``<sub-agent run id>/<tool>`` (a sub-agent's tools see its run id as
their thread's)."""
FINANCE = ["finance"]


@tool
async def charge(amount: int, within: int = 0) -> str:
    """Charge ``amount`` to the card the user names (asked; within ``within`` seconds,
    if given), then run again with the answer."""
    context = tool_context()
    RAN[f"{context.thread_id}/charge"] += 1
    if context.resumed is None:
        expires = timedelta(seconds=within) if within else None
        ask: Ask[str] = Ask(
            "input_required",
            message=f"Which card for {amount}?",
            response={"type": "string"},
            expires=expires,
        )
        raise ToolInterrupt(ask)
    return f"{amount} on {context.resumed}"


def charging(request: ChatRequest) -> ChatReply:
    """``charge <amount>[ within <seconds>]``; then what the charge came to."""
    results = tool_results(request.messages)
    if results:
        return ChatReply(text=f"card: {results[-1][1]}")
    amount, _, within = last_user_text(request.messages).removeprefix("charge ").partition(" ")
    arguments = {"amount": int(amount)}
    if within:
        arguments["within"] = int(within.removeprefix("within "))
    return ChatReply(tool_calls=[ProposedCall(name="charge", arguments=arguments)])


@interrupt_tool
def choose(options: list[str]) -> Ask[str]:
    """Let the user pick one of ``options``."""
    return Ask("input_required", message="Pick one", response={"enum": options})


def picking(request: ChatRequest) -> ChatReply:
    """``a,b,more``: the user picks one; ``more`` asks again, without it; then the pick."""
    results = tool_results(request.messages)
    options = last_user_text(request.messages).split(",")
    if results and results[-1][1] != "more":
        return ChatReply(text=f"picked {results[-1][1]}")
    if results:
        options.remove("more")
    return ChatReply(tool_calls=[ProposedCall(name="choose", arguments={"options": options})])


def by_amount(arguments: dict[str, Any]) -> Approvers | None:
    """Up to 100 the thread's owner approves a payment; above, one of ``finance``."""
    return None if arguments["amount"] <= 100 else Approvers(groups=FINANCE, exclude_requester=True)


@tool(approval=Approval(edits=True, approvers=by_amount))
async def pay(payee: str, amount: int) -> dict[str, Any]:
    """Pay ``amount`` to ``payee``; says the digest its permit binds."""
    permit = tool_context().permit
    return {"paid": amount, "to": payee, "permit": permit.digest if permit else None}


def paying(request: ChatRequest) -> ChatReply:
    """``pay <payee> <amount>``; then the payment's result."""
    results = tool_results(request.messages)
    if results:
        return ChatReply(text=f"payer: {results[-1][1]}")
    _, payee, amount = last_user_text(request.messages).split()
    arguments = {"payee": payee, "amount": int(amount)}
    return ChatReply(tool_calls=[ProposedCall(name="pay", arguments=arguments)])


@tool
async def explode() -> str:
    """Fail for good."""
    RAN[f"{tool_context().thread_id}/explode"] += 1
    raise ApplicationError("The card reader is on fire.", non_retryable=True)


def exploding(request: ChatRequest) -> ChatReply:
    return ChatReply(tool_calls=[ProposedCall(name="explode", arguments={})])


def delegating(request: ChatRequest) -> ChatReply:
    """Each line ``<agent>: <task>`` of the user's message, all in one batch; then the
    sub-agents' answers, one per line."""
    results = tool_results(request.messages)
    if results:
        return ChatReply(text="\n".join(content for _, content in results))
    lines = [line.partition(":") for line in last_user_text(request.messages).splitlines()]
    calls = [
        ProposedCall(name=agent.strip(), arguments={"task": task.strip()})
        for agent, _, task in lines
        if task
    ]
    return ChatReply(tool_calls=calls) if calls else ChatReply(text="Nothing to hand over.")


CARD = AgentDefinition(
    name="card",
    description="Charges the card the user names.",
    model=ScriptedModel("sub-card", charging),
    tools=[charge],
)
PICKER = AgentDefinition(
    name="picker",
    description="Lets the user pick.",
    model=ScriptedModel("sub-picker", picking),
    tools=[choose],
)
PAYER = AgentDefinition(
    name="payer",
    description="Pays, with approvers by amount.",
    model=ScriptedModel("sub-payer", paying),
    tools=[pay],
)
BROKEN = AgentDefinition(
    name="broken",
    description="Fails.",
    model=ScriptedModel("sub-broken", exploding),
    tools=[explode],
)
SHOP = AgentDefinition(
    name="shop",
    description="Hands tasks to sub-agents.",
    model=ScriptedModel("sub-shop", delegating),
    tools=[subagent_tool(agent) for agent in (CARD, PICKER, PAYER, BROKEN)],
)


def both(result: GraphResult) -> str:
    return "; ".join(f"{node}: {answer}" for node, answer in sorted(result.results.items()))


PAIR = AgentDefinition(
    name="pair",
    description="Charges two cards side by side.",
    turn=Graph(nodes=[Node("left", CARD), Node("right", CARD)], answer=both),
)
AGENTS = [SHOP, PAIR]


@pytest.fixture(scope="module")
async def shop(client: Client) -> AsyncIterator[Stack]:
    """A stack serving the agents above."""
    async with serve_stack(client, agents=AGENTS) as running:
        yield running


async def run(stack: Stack, agent: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Post a run to ``agent``: its events, checked like every stream (``post_run``)."""
    return await post_run(stack.http, agent, body)


def resume(thread_id: str, run_id: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "messages": [], "resume": list(entries)}


def resolve(interrupt: dict[str, Any], payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}


def text(events: list[dict[str, Any]], subagent: str | None = None) -> str:
    """What the thread's agent said (or, with ``subagent``, that sub-agent run)."""
    return "".join(
        e["delta"]
        for e in events
        if e["type"] == "TEXT_MESSAGE_CONTENT" and e.get("subagentRunId") == subagent
    )


def interrupts_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt", types(events)
    interrupts: list[dict[str, Any]] = outcome["interrupts"]
    return interrupts


def started(events: list[dict[str, Any]]) -> dict[str, str | None]:
    """The sub-agent runs the events start, each with the tool call it answers
    (``None``: a graph's node)."""
    return {
        e["subagentRunId"]: e.get("parentToolCallId")
        for e in events
        if e["type"] == "SUBAGENT_STARTED"
    }


def child_of(events: list[dict[str, Any]], tool_call_id: str) -> str:
    """The sub-agent run that answers the thread's agent's tool call ``tool_call_id``."""
    [child] = [run for run, call in started(events).items() if call == tool_call_id]
    return child


def own_calls(events: list[dict[str, Any]]) -> list[str]:
    """The ids of the tool calls the thread's own agent made."""
    return [
        e["toolCallId"]
        for e in events
        if e["type"] == "TOOL_CALL_START" and "subagentRunId" not in e
    ]


def results(events: list[dict[str, Any]], subagent: str | None = None) -> dict[str, str]:
    """``TOOL_CALL_RESULT`` contents by call, of the thread's agent or of ``subagent``."""
    return {
        e["toolCallId"]: e["content"]
        for e in events
        if e["type"] == "TOOL_CALL_RESULT" and e.get("subagentRunId") == subagent
    }


async def view(stack: Stack, thread_id: str) -> dict[str, Any]:
    response = await stack.http.get(f"/threads/{thread_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def child_status(client: Client, subagent_run_id: str) -> WorkflowExecutionStatus | None:
    """The status of the sub-agent run's child workflow (its latest run)."""
    return (await client.get_workflow_handle(subagent_run_id).describe()).status


# --- ops ----------------------------------------------------------------------------

FOUND = ["disk-scratch-2024", "vm-build-runner-7", "snapshot-db-nightly-03", "bucket-tmp-uploads"]


async def ops_approval(stack: Stack, thread_id: str) -> dict[str, Any]:
    """Start ``ops`` on a new thread: the approval of the list the inspector found."""
    events = await run(stack, "ops", run_input(thread_id, "r1", "clean up old resources"))
    [interrupt] = interrupts_of(events)
    assert interrupt["subagentRunId"].startswith(f"agui-subagent-{thread_id}-cleanup-")
    assert interrupt["metadata"]["resources"] == FOUND
    return interrupt


def deletions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``delete_resources`` calls' arguments, with the sub-agent run that made each."""
    calls = {
        e["toolCallId"]: e.get("subagentRunId")
        for e in events
        if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "delete_resources"
    }
    return [
        {"subagentRunId": calls[e["toolCallId"]], **json.loads(e["delta"])}
        for e in events
        if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] in calls
    ]


async def test_ops_cleans_up_exactly_the_approved_list(stack: Stack) -> None:
    thread_id = new_thread()
    interrupt = await ops_approval(stack, thread_id)
    chosen = ["disk-scratch-2024", "snapshot-db-nightly-03"]
    payload = {"approved": True, "resources": chosen}

    done = await run(stack, "ops", resume(thread_id, "r2", resolve(interrupt, payload)))

    assert done[-1]["outcome"] == {"type": "success"}
    cleanup = interrupt["subagentRunId"]
    assert deletions(done) == [{"subagentRunId": cleanup, "names": chosen}]
    assert text(done, cleanup) == f"Deleted 2 resources: {', '.join(chosen)}."
    assert text(done) == f"Deleted 2 resources: {', '.join(chosen)}."


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"status": "resolved", "payload": {"approved": False}}, "the cleanup was not approved"),
        ({"status": "cancelled"}, "the approval was cancelled"),
    ],
    ids=["denied", "cancelled"],
)
async def test_ops_deletes_nothing_unless_approved(
    stack: Stack, entry: dict[str, Any], said: str
) -> None:
    thread_id = new_thread()
    interrupt = await ops_approval(stack, thread_id)

    answer = {"interruptId": interrupt["id"], **entry}
    done = await run(stack, "ops", resume(thread_id, "r2", answer))

    assert done[-1]["outcome"] == {"type": "success"}
    assert deletions(done) == []
    assert "TOOL_CALL_START" not in types(done)
    assert text(done) == f"Nothing was deleted: {said}."
    # The cleanup never ran: only the inspector's run is the thread's.
    assert [s["agent"] for s in (await view(stack, thread_id))["subagents"]] == ["inspector"]


async def test_ops_refuses_an_edit_beyond_the_list_found_and_applies_nothing(
    stack: Stack,
) -> None:
    assert stack.client is not None
    thread_id = new_thread()
    interrupt = await ops_approval(stack, thread_id)
    before = await view(stack, thread_id)
    history_before = await history_length(stack.client, thread_id)

    beyond = {"approved": True, "resources": ["disk-scratch-2024", "vm-web-frontend-1"]}
    refused = await run(stack, "ops", resume(thread_id, "r2", resolve(interrupt, beyond)))

    assert types(refused) == ["RUN_STARTED", "RUN_ERROR"]
    assert refused[-1]["code"] == ErrorCode.INVALID_PAYLOAD
    assert await view(stack, thread_id) == before
    assert await history_length(stack.client, thread_id) == history_before

    within = {"approved": True, "resources": ["vm-build-runner-7"]}
    done = await run(stack, "ops", resume(thread_id, "r3", resolve(interrupt, within)))
    assert deletions(done) == [
        {"subagentRunId": interrupt["subagentRunId"], "names": ["vm-build-runner-7"]}
    ]
    assert text(done) == "Deleted 1 resource: vm-build-runner-7."


# --- the life of sub-agent runs -----------------------------------------------------


async def test_the_thread_lists_its_sub_agent_runs_and_the_inbox_their_questions(
    shop: Stack,
) -> None:
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "card: charge 20"))
    [asked] = interrupts_of(events)
    [child] = started(events)
    assert asked["subagentRunId"] == child

    thread = await view(shop, thread_id)
    assert [(s["subagentRunId"], s["agent"], s["status"]) for s in thread["subagents"]] == [
        (child, "card", "waiting")
    ]
    assert [i["subagentRunId"] for i in thread["interrupts"]] == [child]

    async def in_inbox() -> bool:
        page = (await shop.http.get("/interrupts", params={"role": "mine"})).json()
        return any(item["interrupt"]["id"] == asked["id"] for item in page["interrupts"])

    await eventually(in_inbox, what="the sub-agent's question in its owner's inbox")
    page = (await shop.http.get("/interrupts", params={"role": "mine"})).json()
    [item] = [item for item in page["interrupts"] if item["interrupt"]["id"] == asked["id"]]
    assert (item["threadId"], item["interrupt"]["subagentRunId"]) == (thread_id, child)
    assert item["mine"] and item["mayDecide"]

    await run(shop, "shop", resume(thread_id, "r2", resolve(asked, "visa")))
    thread = await view(shop, thread_id)
    [record] = thread["subagents"]
    assert (record["status"], thread["interrupts"]) == ("succeeded", [])
    assert record["finishedAt"]


async def test_cancelling_the_thread_cancels_its_waiting_sub_agent(shop: Stack) -> None:
    assert shop.client is not None
    client = shop.client
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "card: charge 20"))
    [child] = started(events)
    assert await child_status(client, child) == WorkflowExecutionStatus.RUNNING

    await thread_handle(client, thread_id).cancel()

    async def cancelled() -> bool:
        # The thread ends once it has seen its sub-agent's run end, in a task after it.
        thread = await thread_handle(client, thread_id).describe()
        return {await child_status(client, child), thread.status} == {
            WorkflowExecutionStatus.CANCELED
        }

    await eventually(cancelled, what="the sub-agent run, then the thread, to be cancelled")


async def test_the_runbook_terminates_a_thread_with_its_waiting_sub_agent(shop: Stack) -> None:
    """Terminating runs no workflow code, so the thread cannot end its sub-agent runs
    itself; the runbook's one command ends both (docs/operations.md, "Sub-agents")."""
    assert shop.client is not None
    client = shop.client
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "card: charge 20"))
    [child] = started(events)
    query = f"RootWorkflowId='{workflow_id_for(thread_id)}'"

    process = await asyncio.create_subprocess_exec(
        str(TEMPORAL_CLI),
        "workflow",
        "terminate",
        "--query",
        query,
        "--reason",
        "test",
        "--yes",
        "--address",
        client.service_client.config.target_host,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    assert process.returncode == 0, err.decode()

    async def both_terminated() -> bool:
        thread = await thread_handle(client, thread_id).describe()
        return (thread.status, await child_status(client, child)) == (
            WorkflowExecutionStatus.TERMINATED,
            WorkflowExecutionStatus.TERMINATED,
        )

    await eventually(both_terminated, what="the thread and its sub-agent run to be terminated")


async def test_a_failing_sub_agent_fails_the_run_and_leaves_the_thread_usable(
    shop: Stack,
) -> None:
    assert shop.client is not None
    client = shop.client
    thread_id = new_thread()

    events = await run(shop, "shop", run_input(thread_id, "r1", "broken: fix the reader"))

    [child] = started(events)
    [error] = [e for e in events if e["type"] == "SUBAGENT_ERROR"]
    assert error["subagentRunId"] == child
    assert "The card reader is on fire." in error["message"]
    assert types(events)[-1] == "RUN_ERROR"
    assert types(events).index("SUBAGENT_ERROR") < types(events).index("RUN_ERROR")
    assert events[-1]["code"] == ErrorCode.AGENT_FAILED
    assert "Sub-agent broken failed" in events[-1]["message"]
    assert RAN[f"{child}/explode"] == 1

    async def ended() -> bool:
        return await child_status(client, child) == WorkflowExecutionStatus.COMPLETED

    await eventually(ended, what="the failed sub-agent run to end")
    [record] = (await view(shop, thread_id))["subagents"]
    assert record["status"] == "failed"

    again = await run(shop, "shop", run_input(thread_id, "r2", "broken: fix the reader", "hello"))
    assert again[-1]["outcome"] == {"type": "success"}
    assert text(again) == "Nothing to hand over."


async def test_a_sub_agent_failing_beside_one_that_asks_ends_both(shop: Stack) -> None:
    assert shop.client is not None
    client = shop.client
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "broken: fix the reader\ncard: charge 20")

    events = await run(shop, "shop", body)

    assert events[-1]["code"] == ErrorCode.AGENT_FAILED
    errors = {e["subagentRunId"]: e["message"] for e in events if e["type"] == "SUBAGENT_ERROR"}
    [failed] = [child for child, message in errors.items() if "on fire" in message]
    [asking] = [child for child in started(events) if child != failed]
    # What it asked was never opened: no suspension, the run failed around it.
    assert errors[asking] == "The run ended before the sub-agent did."
    assert "SUBAGENT_FINISHED" not in types(events)
    thread = await view(shop, thread_id)
    assert thread["interrupts"] == []
    statuses = {s["subagentRunId"]: s["status"] for s in thread["subagents"]}
    assert statuses == {failed: "failed", asking: "cancelled"}

    async def cancelled() -> bool:
        return await child_status(client, asking) == WorkflowExecutionStatus.CANCELED

    await eventually(cancelled, what="the asking sub-agent run to be cancelled")
    again = await run(shop, "shop", run_input(thread_id, "r2", "broken: fix the reader", "hi"))
    assert text(again) == "Nothing to hand over."
