"""A deploy never wedges a thread: agents changed or dropped under waiting threads, and
bugs in agent code, end runs cleanly while every thread stays readable and usable.

Each "deploy" here stops the worker and gateway and starts new ones, serving a changed
definition of the same agent (or none) on the same task queue: the new worker has no
cached threads, so every thread it serves is rebuilt from its history under the new code.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import replace

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from gateway.streaming import thread_handle
from settings import Settings
from tests.helpers import (
    TEST_SECRET,
    Stack,
    eventually,
    gateway_client,
    new_thread,
    post_run,
    run_input,
    serve_gateway,
    serve_stack,
    thread_log,
)
from worker import build_worker
from workflows.agents import EXAMPLES
from workflows.errors import ErrorCode
from workflows.sdk import (
    AgentDefinition,
    Approval,
    ChatReply,
    ChatRequest,
    ProposedCall,
    ScriptedModel,
    last_user_text,
    tool,
    tool_results,
)
from workflows.thread_ids import workflow_id_for

REFUND = re.compile(r"refund (\S+) on (\w+)")


@tool
async def refund(order_id: str, amount: float) -> dict[str, object]:
    """Refund ``amount`` on order ``order_id``."""
    return {"orderId": order_id, "refunded": amount}


def refunds(request: ChatRequest) -> ChatReply:
    """Refund what the user asks for (the amount as the user wrote it); then report."""
    results = tool_results(request.messages)
    if results:
        return ChatReply(text=f"Done: {results[-1][1]}")
    match = REFUND.search(last_user_text(request.messages))
    if match is None:
        return ChatReply(text="Which order, and how much?")
    amount: object = float(match[1]) if match[1].replace(".", "").isdigit() else match[1]
    return ChatReply(
        tool_calls=[ProposedCall(name="refund", arguments={"order_id": match[2], "amount": amount})]
    )


MODEL = ScriptedModel("deploys", refunds)


def support(threshold: float) -> AgentDefinition:
    """The tutorial's agent, approving refunds over ``threshold``: the policy a deploy
    changes."""
    return AgentDefinition(
        name="deploys",
        description="Refunds; a person approves large ones.",
        model=MODEL,
        tools=[
            replace(
                refund, approval=Approval(when=lambda arguments: arguments["amount"] > threshold)
            )
        ],
    )


async def ask_refund(stack: Stack, amount: str) -> tuple[str, dict[str, object]]:
    thread_id = new_thread()
    events = await post_run(
        stack.http, "deploys", run_input(thread_id, "r1", f"refund {amount} on B42")
    )
    [approval] = events[-1]["outcome"]["interrupts"]
    return thread_id, approval


def approve(thread_id: str, approval: dict[str, object]) -> dict[str, object]:
    entry = {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": True}}
    return {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}


async def failed_workflow_tasks(client: Client, thread_id: str) -> int:
    """Workflow tasks that failed in any workflow run of the thread."""
    latest = await thread_handle(client, thread_id).describe()
    run_id = latest.raw_description.workflow_execution_info.first_run_id
    failed = 0
    while run_id:
        handle = client.get_workflow_handle(workflow_id_for(thread_id), run_id=run_id)
        events = (await handle.fetch_history()).events
        failed += sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in events)
        continued = events[-1].workflow_execution_continued_as_new_event_attributes
        run_id = continued.new_execution_run_id
    return failed


async def test_threads_waiting_across_a_policy_change_stay_readable_and_resumable(
    client: Client,
) -> None:
    task_queue = f"tq-{uuid.uuid4()}"
    async with serve_stack(client, task_queue, agents=[support(threshold=100)]) as stack:
        # Under the old rule both wait; under the new one only the larger would.
        moot, moot_approval = await ask_refund(stack, "250")
        still, still_approval = await ask_refund(stack, "500")
        before = {t: (await stack.http.get(f"/threads/{t}")).json() for t in (moot, still)}

    async with serve_stack(client, task_queue, agents=[support(threshold=300)]) as stack:
        for thread_id, view in before.items():
            response = await stack.http.get(f"/threads/{thread_id}")
            assert response.status_code == 200
            assert response.json()["interrupts"] == view["interrupts"]
            assert response.json()["status"] == "waiting"

        # The new code asks for no approval at 250, so it cannot continue the turn
        # that paused on one: that run fails, cleanly.
        failed = await post_run(stack.http, "deploys", approve(moot, moot_approval))
        assert failed[-1]["type"] == "RUN_ERROR"
        assert failed[-1]["code"] == ErrorCode.AGENT_FAILED
        assert "changed while it was paused" in failed[-1]["message"]
        # ... and the thread goes on under the new code.
        body = run_input(moot, "r3", "refund 250 on B42", "refund 200 on C7")
        body["messages"] = [
            *(await stack.http.get(f"/threads/{moot}")).json()["messages"],
            body["messages"][1],
        ]
        again = await post_run(stack.http, "deploys", body)
        assert again[-1]["outcome"] == {"type": "success"}

        # The new code asks at 500 too: the paused turn continues where it was.
        done = await post_run(stack.http, "deploys", approve(still, still_approval))
        assert done[-1]["outcome"] == {"type": "success"}
        [result] = [e["content"] for e in done if e["type"] == "TOOL_CALL_RESULT"]
        assert '"refunded": 500.0' in result

    for thread_id in (moot, still):
        assert await failed_workflow_tasks(client, thread_id) == 0


async def test_a_bug_in_agent_code_ends_the_run_and_the_thread_stays_usable(
    client: Client,
) -> None:
    async with serve_stack(client, agents=[support(threshold=100)]) as stack:
        thread_id = new_thread()
        # The model's "lots" for a number makes the approval's condition raise
        # (TypeError: str > int) inside workflow code.
        events = await post_run(
            stack.http, "deploys", run_input(thread_id, "r1", "refund lots on B42")
        )
        assert events[-1]["type"] == "RUN_ERROR"
        assert events[-1]["code"] == ErrorCode.AGENT_FAILED
        assert "TypeError" not in events[-1]["message"]

        view = (await stack.http.get(f"/threads/{thread_id}")).json()
        assert view["status"] == "idle"
        assert view["runs"][-1]["status"] == "failed"
        body = run_input(thread_id, "r2", "refund lots on B42", "refund 20 on B42")
        body["messages"] = [*view["messages"], body["messages"][1]]
        again = await post_run(stack.http, "deploys", body)
        assert again[-1]["outcome"] == {"type": "success"}

    assert await failed_workflow_tasks(client, thread_id) == 0


async def test_a_worker_without_the_threads_agent_rejects_its_runs_until_one_serves_it(
    client: Client,
) -> None:
    settings = Settings(task_queue=f"tq-{uuid.uuid4()}", auth_hs256_secret=TEST_SECRET)
    async with serve_stack(client, settings.task_queue, agents=[support(threshold=100)]) as stack:
        waiting, approval = await ask_refund(stack, "500")

    # A deploy whose gateway still serves the agent, but whose worker does not.
    async with (
        build_worker(client, settings, []),
        serve_gateway(settings, client, [support(threshold=100)]) as url,
        gateway_client(url) as http,
    ):
        for body in (approve(waiting, approval), run_input(new_thread(), "r1", "refund 5 on A1")):
            events = await post_run(http, "deploys", body)
            assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
            assert events[-1]["code"] == ErrorCode.UNKNOWN_AGENT
            assert events[-1]["message"] == "No agent named 'deploys' is served."
        # Rejected by the run's validator: the thread is as it was.
        view = (await http.get(f"/threads/{waiting}")).json()
        assert view["status"] == "waiting" and view["interrupts"] == [approval]

    async with serve_stack(client, settings.task_queue, agents=[support(threshold=100)]) as stack:
        done = await post_run(stack.http, "deploys", approve(waiting, approval))
        assert done[-1]["outcome"] == {"type": "success"}

    assert await failed_workflow_tasks(client, waiting) == 0


async def test_an_expiry_after_a_deploy_dropped_the_agent_ends_its_run_cleanly(
    client: Client,
) -> None:
    task_queue = f"tq-{uuid.uuid4()}"
    thread_id = new_thread()
    async with serve_stack(client, task_queue) as stack:
        body = run_input(thread_id, "r1", "quarterly", forwardedProps={"expiresInSeconds": 4})
        asked = await post_run(stack.http, "demo", body)
        assert asked[-1]["outcome"]["type"] == "interrupt"

    # The deploy is done before the deadline: the expiry's run, which no client sent and
    # no validator checks, meets an agent the worker does not serve.
    others = [agent for agent in EXAMPLES if agent.name != "demo"]
    async with serve_stack(client, task_queue, agents=others) as stack:
        assert (await stack.http.get(f"/threads/{thread_id}")).json()["interrupts"]

        async def expired() -> bool:
            view = (await stack.http.get(f"/threads/{thread_id}")).json()
            return bool(view["status"] == "idle")

        await eventually(expired, what="the interrupt to expire")
        view = (await stack.http.get(f"/threads/{thread_id}")).json()
        assert view["status"] == "idle" and view["interrupts"] == []
        expiry = view["runs"][-1]
        assert expiry["runId"].startswith("expiry-") and expiry["status"] == "failed"
        _, error = (await thread_log(stack.http, thread_id))[-1]
        assert error["type"] == "RUN_ERROR" and error["code"] == ErrorCode.AGENT_FAILED
        assert "No agent named 'demo' is served." in error["message"]

    assert await failed_workflow_tasks(client, thread_id) == 0
