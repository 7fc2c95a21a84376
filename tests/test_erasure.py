"""``DELETE /threads/{threadId}``: a thread erased with every run of its workflow, gone
from reads, listings and inboxes; only for its owner and admins."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from tests.helpers import (
    Stack,
    bearer,
    eventually,
    new_thread,
    post_run,
    run_input,
    serve_stack,
    start_dev_server,
)
from tests.test_approvers import AGENT, APPROVALS, FINANCE
from tests.test_subagents import SHOP, resolve, resume, started
from workflows.thread_ids import workflow_id_for

ADMINS = ["agui-admins"]


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server of this module's own, which deletes closed workflow runs within a
    second or two of being asked, not some 30 s: Temporal deletes one once its transfer
    queue's acknowledged level, saved every ``history.transferProcessorUpdateAckInterval``,
    shows that its close was processed (``docs/operations.md``)."""
    env = await start_dev_server(
        dynamic_config={"history.transferProcessorUpdateAckInterval": "1s"}
    )
    yield env
    await env.shutdown()


@pytest.fixture(scope="module")
def client(server: WorkflowEnvironment) -> Client:
    return server.client


@pytest.fixture(scope="module")
async def payments(client: Client) -> AsyncIterator[Stack]:
    """A stack serving an agent whose payments finance approves."""
    async with serve_stack(client, agents=[APPROVALS]) as running:
        yield running


@pytest.fixture(scope="module")
async def delegating(client: Client) -> AsyncIterator[Stack]:
    """A stack serving an agent that hands tasks to sub-agents."""
    async with serve_stack(client, agents=[SHOP]) as running:
        yield running


def _as(stack: Stack, subject: str, groups: list[str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=stack.url, headers=bearer(subject, groups or []), timeout=30)


async def _waiting_thread(stack: Stack) -> tuple[str, dict[str, Any]]:
    """A thread of the owner's with two runs, waiting on a payment finance approves."""
    thread_id = new_thread()
    first = await post_run(stack.http, AGENT, run_input(thread_id, "r1", "hello"))
    assert first[-1]["outcome"] == {"type": "success"}
    body = run_input(thread_id, "r2", "hello", "pay bob 500")
    events = await post_run(stack.http, AGENT, body)
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupt


async def _runs(client: Client, thread_id: str) -> list[str]:
    query = f"WorkflowId = '{workflow_id_for(thread_id)}'"
    return [execution.run_id async for execution in client.list_workflows(query)]


async def _inbox_ids(http: httpx.AsyncClient) -> set[str]:
    page = (await http.get("/interrupts")).json()
    return {item["interrupt"]["id"] for item in page["interrupts"]}


async def _listed(http: httpx.AsyncClient) -> set[str]:
    page = (await http.get("/threads")).json()
    return {thread["threadId"] for thread in page["threads"]}


async def _gone(client: Client, thread_id: str) -> bool:
    return await _gone_workflow(client, workflow_id_for(thread_id))


async def _gone_workflow(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        return err.status == RPCStatusCode.NOT_FOUND
    return False


async def test_the_owner_erases_a_waiting_thread_with_every_run(
    client: Client, payments: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    thread_id, interrupt = await _waiting_thread(payments)
    # Continue-as-new after every run: two closed workflow runs and the waiting one.
    await eventually(
        lambda: _has_runs(client, thread_id, 3), what="the thread's three workflow runs"
    )
    async with _as(payments, "carol", FINANCE) as carol:
        await eventually(
            lambda: _contains(_inbox_ids(carol), interrupt["id"]), what="carol's inbox"
        )
        await eventually(
            lambda: _contains(_listed(payments.http), thread_id), what="the owner's listing"
        )

        with caplog.at_level(logging.INFO, logger="gateway.audit"):
            response = await payments.http.delete(f"/threads/{thread_id}")
        assert response.status_code == 204, response.text
        assert response.content == b""
        (logged,) = [r for r in caplog.records if r.name == "gateway.audit"]
        assert thread_id in logged.getMessage() and "alice" in logged.getMessage()
        assert "bob" not in logged.getMessage()  # nothing of what the thread held

        async def erased() -> bool:
            return (
                await _gone(client, thread_id)
                and not await _runs(client, thread_id)
                and interrupt["id"] not in await _inbox_ids(carol)
                and thread_id not in await _listed(payments.http)
            )

        await eventually(erased, what="the thread gone from Temporal, inboxes and listings")
    missing = await payments.http.get(f"/threads/{thread_id}")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "UNKNOWN_THREAD")

    async def deleted_again_is_404() -> bool:
        return (await payments.http.delete(f"/threads/{thread_id}")).status_code == 404

    await eventually(deleted_again_is_404, what="a second DELETE to answer 404")

    # The id is free again: a run on it starts a new, empty thread.
    events = await post_run(payments.http, AGENT, run_input(thread_id, "r3", "hello"))
    assert events[-1]["outcome"] == {"type": "success"}
    thread = (await payments.http.get(f"/threads/{thread_id}")).json()
    assert [run["runId"] for run in thread["runs"]] == ["r3"]
    assert thread["interrupts"] == []


async def test_only_the_owner_or_an_admin_erases(client: Client, payments: Stack) -> None:
    thread_id, interrupt = await _waiting_thread(payments)
    await eventually(
        lambda: _has_runs(client, thread_id, 3), what="the thread's three workflow runs"
    )
    before = (await payments.http.get(f"/threads/{thread_id}")).json()

    # An approver of its interrupt is not its owner: to them the thread does not exist,
    # just as one that never did.
    async with _as(payments, "carol", FINANCE) as carol:
        for target in (thread_id, new_thread()):
            refused = await carol.delete(f"/threads/{target}")
            assert refused.status_code == 404
            assert refused.json()["error"] == {
                "code": "UNKNOWN_THREAD",
                "message": f"No thread {target!r}.",
            }
        assert interrupt["id"] in await _inbox_ids(carol)
    assert not await _gone(client, thread_id)
    assert (await payments.http.get(f"/threads/{thread_id}")).json() == before
    assert len(await _runs(client, thread_id)) == 3

    async with _as(payments, "root", ADMINS) as admin:
        response = await admin.delete(f"/threads/{thread_id}")
        assert response.status_code == 204, response.text
    await eventually(lambda: _gone(client, thread_id), what="the admin's deletion")


async def _has_runs(client: Client, thread_id: str, count: int) -> bool:
    return len(await _runs(client, thread_id)) == count


async def _contains(found: Any, item: str) -> bool:
    return item in await found


async def test_erasing_a_thread_erases_its_sub_agent_runs(
    client: Client, delegating: Stack
) -> None:
    """A thread with a sub-agent run that ended and one that waits: both go with it."""
    thread_id = new_thread()
    events = await post_run(delegating.http, "shop", run_input(thread_id, "r1", "picker: a,b"))
    [picker] = started(events)
    (picked,) = events[-1]["outcome"]["interrupts"]
    await post_run(delegating.http, "shop", resume(thread_id, "r2", resolve(picked, "a")))
    body = run_input(thread_id, "r3", "picker: a,b", "card: charge 20")
    [card] = started(await post_run(delegating.http, "shop", body))
    workflow_id = workflow_id_for(thread_id)
    under = f"RootWorkflowId = '{workflow_id}' AND WorkflowId != '{workflow_id}'"

    async def listed() -> set[str]:
        return {execution.id async for execution in client.list_workflows(under)}

    async def both_listed() -> bool:
        return await listed() == {picker, card}

    await eventually(both_listed, what="the sub-agent runs listed under the thread")
    assert await client.get_workflow_handle(picker).result() == "picked a"

    response = await delegating.http.delete(f"/threads/{thread_id}")
    assert response.status_code == 204, response.text

    async def erased() -> bool:
        gone = [await _gone_workflow(client, child) for child in (picker, card)]
        return all(gone) and not await listed()

    # Temporal deletes asynchronously: a closed run once its transfer queue acknowledged
    # its close, which a loaded machine (the whole suite on 2 cores) takes well past 15 s.
    await eventually(erased, timeout=60, what="the sub-agent runs gone from Temporal")
