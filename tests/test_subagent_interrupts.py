"""Sub-agents' questions, asked through their thread: each a thread's interrupt that
names its sub-agent run (``subagentRunId``), under every rule of the interrupt contract,
its answer handed to the child workflow that asked. Real gateway, worker and Temporal
server; the agents are ``tests/test_subagents.py``'s.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from ag_ui.core import ResumeEntry
from temporalio.client import Client, WorkflowExecutionStatus

from gateway.streaming import thread_handle
from tests.helpers import (
    OWNER,
    Stack,
    assert_valid_stream,
    bearer,
    eventually,
    history_length,
    new_thread,
    read_sse,
    run_input,
    serve_stack,
    types,
)
from tests.test_subagents import (
    AGENTS,
    FINANCE,
    RAN,
    child_of,
    child_status,
    interrupts_of,
    own_calls,
    resolve,
    results,
    resume,
    run,
    started,
    text,
    view,
)
from workflows.approvers import arguments_digest
from workflows.errors import ErrorCode
from workflows.models import OperatorResume
from workflows.thread import ThreadWorkflow


@pytest.fixture(scope="module")
async def shop(client: Client) -> AsyncIterator[Stack]:
    """A stack serving ``tests/test_subagents.py``'s agents."""
    async with serve_stack(client, agents=AGENTS) as running:
        yield running


def calls_of(events: list[dict[str, Any]], subagent: str) -> list[str]:
    """The ids of the tool calls sub-agent run ``subagent`` made."""
    return [
        e["toolCallId"]
        for e in events
        if e["type"] == "TOOL_CALL_START" and e.get("subagentRunId") == subagent
    ]


def lifecycle(events: list[dict[str, Any]], subagent: str) -> list[tuple[str, Any]]:
    """The sub-agent run's lifecycle events, with the outcome of each that ends it."""
    return [
        (e["type"], e.get("outcome"))
        for e in events
        if e["type"].startswith("SUBAGENT_") and e["subagentRunId"] == subagent
    ]


async def test_a_sub_agents_tool_asks_and_runs_again_with_the_answer(shop: Stack) -> None:
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "card: charge 20"))

    [delegated] = own_calls(events)
    child = child_of(events, delegated)
    [asked] = interrupts_of(events)
    [charge] = calls_of(events, child)
    assert (asked["subagentRunId"], asked["toolCallId"]) == (child, charge)
    assert asked["message"] == "Which card for 20?"
    suspended = {"type": "suspended", "interruptIds": [asked["id"]]}
    assert lifecycle(events, child) == [
        ("SUBAGENT_STARTED", None),
        ("SUBAGENT_FINISHED", suspended),
    ]
    assert results(events) == {} and RAN[f"{child}/charge"] == 1

    done = await run(shop, "shop", resume(thread_id, "r2", resolve(asked, "visa")))

    assert RAN[f"{child}/charge"] == 2
    assert results(done, child) == {charge: "20 on visa"}
    assert results(done) == {delegated: "card: 20 on visa"}
    assert text(done) == "card: 20 on visa"
    assert lifecycle(done, child) == [
        ("SUBAGENT_STARTED", None),
        ("SUBAGENT_FINISHED", {"type": "success"}),
    ]


async def test_a_sub_agents_interrupt_only_tool_asks_under_its_schema(shop: Stack) -> None:
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "picker: red,blue"))
    [delegated] = own_calls(events)
    child = child_of(events, delegated)
    [asked] = interrupts_of(events)
    assert (asked["subagentRunId"], asked["toolCallId"]) == (child, calls_of(events, child)[0])
    assert asked["responseSchema"] == {"enum": ["red", "blue"]}

    refused = await run(shop, "shop", resume(thread_id, "r2", resolve(asked, "green")))
    assert refused[-1]["code"] == ErrorCode.INVALID_PAYLOAD

    done = await run(shop, "shop", resume(thread_id, "r3", resolve(asked, "blue")))
    assert results(done, child) == {asked["toolCallId"]: "blue"}
    assert results(done) == {delegated: "picked blue"}


async def test_a_sub_agent_asks_again_after_its_answer(shop: Stack) -> None:
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "picker: red,blue,more"))
    [first] = interrupts_of(events)
    child = first["subagentRunId"]

    again = await run(shop, "shop", resume(thread_id, "r2", resolve(first, "more")))

    [second] = interrupts_of(again)
    assert second["subagentRunId"] == child and second["id"] != first["id"]
    assert second["responseSchema"] == {"enum": ["red", "blue"]}
    suspended = {"type": "suspended", "interruptIds": [second["id"]]}
    assert lifecycle(again, child) == [("SUBAGENT_STARTED", None), ("SUBAGENT_FINISHED", suspended)]
    done = await run(shop, "shop", resume(thread_id, "r3", resolve(second, "red")))
    assert text(done) == "picked red"
    assert [s["status"] for s in (await view(shop, thread_id))["subagents"]] == ["succeeded"]


async def test_a_sub_agents_approval_runs_on_edits_its_policy_allows(shop: Stack) -> None:
    assert shop.client is not None
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "payer: pay bob 50"))
    [delegated] = own_calls(events)
    child = child_of(events, delegated)
    [approval] = interrupts_of(events)
    assert (approval["reason"], approval["subagentRunId"]) == ("tool_call", child)
    before = await view(shop, thread_id)
    history_before = await history_length(shop.client, thread_id)

    # 500 needs finance, which the owner's approval of 50 cannot stand for.
    over = {"approved": True, "editedArgs": {"payee": "bob", "amount": 500}}
    refused = await run(shop, "shop", resume(thread_id, "r2", resolve(approval, over)))
    assert types(refused) == ["RUN_STARTED", "RUN_ERROR"]
    assert refused[-1]["code"] == ErrorCode.POLICY_EXCEEDED
    assert await view(shop, thread_id) == before
    assert await history_length(shop.client, thread_id) == history_before

    edited = {"payee": "bob", "amount": 80}
    within = {"approved": True, "editedArgs": edited}
    done = await run(shop, "shop", resume(thread_id, "r3", resolve(approval, within)))

    [paid] = results(done, child).values()
    # It ran on the edited arguments, under a permit that binds exactly them.
    assert json.loads(paid) == {
        "editedArgs": edited,
        "editedBy": [OWNER],
        "result": {"paid": 80, "to": "bob", "permit": arguments_digest(edited)},
    }
    assert results(done) == {delegated: f"payer: {paid}"}


async def test_a_sub_agents_approval_is_decided_by_its_approvers(shop: Stack) -> None:
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "payer: pay bob 500"))
    [approval] = interrupts_of(events)
    child = approval["subagentRunId"]

    # Not the owner's to approve: finance decides, through the decisions endpoint.
    refused = await run(
        shop, "shop", resume(thread_id, "r2", resolve(approval, {"approved": True}))
    )
    assert refused[-1]["code"] == ErrorCode.NOT_AN_APPROVER
    edited = {"payee": "bob", "amount": 300}
    async with httpx.AsyncClient(
        base_url=shop.url, headers=bearer("carol", FINANCE), timeout=30
    ) as carol:
        response = await carol.post(
            f"/threads/{thread_id}/interrupts/{approval['id']}/decisions",
            json={"status": "resolved", "payload": {"approved": True, "editedArgs": edited}},
        )
    assert response.json()["outcome"] == "settled", response.text

    done = await run_events(shop, thread_id, response.json()["runId"])
    [paid] = results(done, child).values()
    assert json.loads(paid) == {
        "editedArgs": edited,
        "editedBy": ["carol"],
        "result": {"paid": 300, "to": "bob", "permit": arguments_digest(edited)},
    }


async def run_events(stack: Stack, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    """The events of run ``run_id``, which no client started, once it has ended."""

    async def ended() -> bool:
        runs = (await view(stack, thread_id))["runs"]
        return any(r["runId"] == run_id and r["status"] != "running" for r in runs)

    await eventually(ended, what=f"run {run_id} to end")
    async with stack.http.stream("GET", f"/threads/{thread_id}/runs/{run_id}/events") as r:
        events = [event for _, event in await read_sse(r)]
    assert_valid_stream(events, thread_id)
    return events


async def two_asking(stack: Stack, thread_id: str, shape: str) -> list[dict[str, Any]]:
    """Start two card sub-agents in one run (a model's batch, or a graph's two nodes);
    the two interrupts it ends on, one per sub-agent."""
    if shape == "batch":
        events = await run(
            stack, "shop", run_input(thread_id, "r1", "card: charge 20\ncard: charge 30")
        )
    else:
        events = await run(stack, "pair", run_input(thread_id, "r1", "charge 20"))
    asked = interrupts_of(events)
    children = sorted(started(events))
    assert sorted(i["subagentRunId"] for i in asked) == children and len(children) == 2
    for interrupt in asked:
        suspended = {"type": "suspended", "interruptIds": [interrupt["id"]]}
        assert lifecycle(events, interrupt["subagentRunId"])[-1] == ("SUBAGENT_FINISHED", suspended)
    assert types(events).count("RUN_FINISHED") == 1
    return asked


def charged(interrupt: dict[str, Any], card: str) -> str:
    """What a card sub-agent says once ``interrupt``, its question, got ``card``."""
    amount = interrupt["message"].removeprefix("Which card for ").removesuffix("?")
    return f"card: {amount} on {card}"


@pytest.mark.parametrize("shape", ["batch", "graph"])
async def test_one_resume_answers_two_sub_agents_each_its_own(shop: Stack, shape: str) -> None:
    thread_id = new_thread()
    first, second = await two_asking(shop, thread_id, shape)
    agent = "shop" if shape == "batch" else "pair"

    done = await run(
        shop, agent, resume(thread_id, "r2", resolve(first, "visa"), resolve(second, "amex"))
    )

    assert done[-1]["outcome"] == {"type": "success"}
    for interrupt, card in ((first, "visa"), (second, "amex")):
        assert text(done, interrupt["subagentRunId"]) == charged(interrupt, card)
    said = text(done)
    assert "visa" in said and "amex" in said
    statuses = [s["status"] for s in (await view(shop, thread_id))["subagents"]]
    assert statuses == ["succeeded", "succeeded"]


async def child_history(client: Client, subagent_run_id: str) -> int:
    """The history length of the sub-agent run's current workflow run, once it waits
    for its answers (it continued as new to wait)."""
    handle = client.get_workflow_handle(subagent_run_id)
    lengths: list[int] = []

    async def waiting() -> bool:
        described = await handle.describe()
        info = described.raw_description.workflow_execution_info
        events = (await handle.fetch_history()).events
        lengths[:] = [len(events)]
        return described.run_id != info.first_run_id and events[-1].HasField(
            "workflow_task_completed_event_attributes"
        )

    await eventually(waiting, what=f"sub-agent run {subagent_run_id} to wait")
    return lengths[0]


async def test_a_bad_resume_of_two_sub_agents_applies_nothing_in_either(shop: Stack) -> None:
    assert shop.client is not None
    client = shop.client
    thread_id = new_thread()
    first, second = await two_asking(shop, thread_id, "batch")
    children = [first["subagentRunId"], second["subagentRunId"]]
    histories = [await child_history(client, child) for child in children]
    before = await view(shop, thread_id)
    history_before = await history_length(client, thread_id)
    forged = {**resolve(second, "amex"), "interruptId": "int-forged"}

    for code, entries in (
        (ErrorCode.UNKNOWN_INTERRUPT, [resolve(first, "visa"), forged]),
        (ErrorCode.INCOMPLETE_RESUME, [resolve(first, "visa")]),
    ):
        refused = await run(shop, "shop", resume(thread_id, f"bad-{code}", *entries))
        assert types(refused) == ["RUN_STARTED", "RUN_ERROR"], code
        assert refused[-1]["code"] == code

    assert await view(shop, thread_id) == before
    assert [i["id"] for i in before["interrupts"]] == [first["id"], second["id"]]
    assert await history_length(client, thread_id) == history_before
    for child, length in zip(children, histories, strict=True):
        assert await child_status(client, child) == WorkflowExecutionStatus.RUNNING
        assert len((await client.get_workflow_handle(child).fetch_history()).events) == length
    assert [RAN[f"{child}/charge"] for child in children] == [1, 1]

    done = await run(
        shop, "shop", resume(thread_id, "r2", resolve(first, "visa"), resolve(second, "amex"))
    )
    said = sorted(text(done).splitlines())
    assert said == sorted([charged(first, "visa"), charged(second, "amex")])


async def test_a_sub_agents_question_expires_and_the_thread_goes_on(shop: Stack) -> None:
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "card: charge 20 within 2"))
    [asked] = interrupts_of(events)
    child = asked["subagentRunId"]
    assert asked["expiresAt"]

    async def expired() -> bool:
        thread = await view(shop, thread_id)
        return bool(thread["status"] == "idle" and thread["runs"][-1]["status"] == "succeeded")

    await eventually(expired, what="the expiry run to end")
    thread = await view(shop, thread_id)
    assert thread["interrupts"] == []
    expiry = thread["runs"][-1]["runId"]
    assert expiry.startswith("expiry-")
    done = await run_events(shop, thread_id, expiry)

    [charge] = calls_of(events, child)
    assert results(done, child) == {charge: "Not run: the question was expired."}
    assert text(done) == "card: Not run: the question was expired."
    assert RAN[f"{child}/charge"] == 1
    assert [s["status"] for s in thread["subagents"]] == ["succeeded"]


async def test_one_of_two_sub_agents_questions_expires_and_its_run_waits_for_the_other(
    shop: Stack,
) -> None:
    assert shop.client is not None
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "card: charge 20 within 2\ncard: charge 30")
    asked = interrupts_of(await run(shop, "shop", body))
    [expiring] = [i for i in asked if "expiresAt" in i]
    [waiting] = [i for i in asked if "expiresAt" not in i]

    async def expired() -> bool:
        last = (await view(shop, thread_id))["runs"][-1]
        return bool(last["runId"].startswith("expiry-") and last["status"] == "interrupted")

    await eventually(expired, what="the expiry run to end")
    thread = await view(shop, thread_id)
    assert [i["id"] for i in thread["interrupts"]] == [waiting["id"]]
    # Both sub-agent runs wait: the expired one for its answer to be handed over.
    assert [s["status"] for s in thread["subagents"]] == ["waiting", "waiting"]
    for interrupt in asked:
        status = await child_status(shop.client, interrupt["subagentRunId"])
        assert status == WorkflowExecutionStatus.RUNNING

    done = await run(shop, "shop", resume(thread_id, "r2", resolve(waiting, "amex")))

    assert text(done, expiring["subagentRunId"]) == "card: Not run: the question was expired."
    assert text(done, waiting["subagentRunId"]) == "card: 30 on amex"
    assert done[-1]["outcome"] == {"type": "success"}


async def test_a_repeated_resume_replays_its_run_and_hands_the_sub_agent_nothing_twice(
    shop: Stack,
) -> None:
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "card: charge 30"))
    [delegated] = own_calls(events)
    child = child_of(events, delegated)
    [asked] = interrupts_of(events)
    done = await run(shop, "shop", resume(thread_id, "r2", resolve(asked, "visa")))
    ran = RAN[f"{child}/charge"]

    again = await run(shop, "shop", resume(thread_id, "r2", resolve(asked, "visa")))

    assert again == done
    assert RAN[f"{child}/charge"] == ran
    assert [r["status"] for r in (await view(shop, thread_id))["subagents"]] == ["succeeded"]


async def test_an_operator_answers_a_sub_agents_question(shop: Stack) -> None:
    assert shop.client is not None
    thread_id = new_thread()
    events = await run(shop, "shop", run_input(thread_id, "r1", "card: charge 40"))
    [delegated] = own_calls(events)
    child = child_of(events, delegated)
    [asked] = interrupts_of(events)
    entry = ResumeEntry(interrupt_id=asked["id"], status="resolved", payload="amex")

    result = await thread_handle(shop.client, thread_id).execute_update(
        ThreadWorkflow.operator_resume, OperatorResume(resume=[entry], operator="oncall")
    )

    assert result.outcome == "applied"
    thread = await view(shop, thread_id)
    assert thread["interrupts"] == []
    assert [r["status"] for r in thread["subagents"]] == ["succeeded"]
    assert thread["messages"][-1]["content"] == "card: 40 on amex"
    assert await child_status(shop.client, child) == WorkflowExecutionStatus.COMPLETED
