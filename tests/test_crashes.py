"""Processes die without warning (``kill -9``); threads lose nothing and repeat nothing.

Workers and gateways run as real processes (``tests/processes.py``); the demo's emails
go to a local mail endpoint (``AGUI_DEMO_MAIL_URL``), which records each delivery with its
idempotency key and can hold one unanswered: that pins a worker mid-resume, inside the
``send_email`` tool, when it is killed. Sub-agents are child workflows of their thread;
the worker of ``tests/crash_worker.py`` posts the ops example's deletions to the same
kind of endpoint, which pins a worker mid-way through its cleanup sub-agent, and serves
``treasurer``, whose sub-agent run waits on a question of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from settings import Settings
from tests.crash_worker import AGENTS
from tests.helpers import (
    TEST_SECRET,
    assert_intact,
    at_rest,
    eventually,
    free_port,
    gateway_client,
    new_thread,
    post_run,
    run_input,
    serve_gateway,
    sse_messages,
    thread_log,
    wait_until_healthy,
    workflow_run_histories,
)
from tests.processes import ROOT, DevServer, Gateway, child_processes, engine
from tests.receiver import Receiver
from worker import WORKFLOWS, activities, ensure_search_attributes
from workflows import served
from workflows.agents import EXAMPLES
from workflows.thread_ids import workflow_id_for

FILING = {"quarter": "Q2", "year": 2026, "revenue": 7}


def _address(client: Client) -> str:
    return client.service_client.config.target_host


def _approve_all(thread_id: str, interrupts: list[dict[str, Any]]) -> dict[str, Any]:
    """The resume a person sends: approve each email, fill in the form."""
    entries = [
        {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"approved": True} if interrupt["reason"] == "tool_call" else FILING,
        }
        for interrupt in interrupts
    ]
    return {"threadId": thread_id, "runId": "r2", "messages": [], "resume": entries}


async def _ask_approval_and_form(gateway: Gateway) -> tuple[str, list[dict[str, Any]]]:
    """A new thread waiting on an email approval and a three-day form; its interrupts."""
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "mail ann@example.com, quarterly")
    events = await post_run(gateway.http, "demo", body)
    interrupts: list[dict[str, Any]] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupts


async def _thread(gateway: Gateway, thread_id: str) -> dict[str, Any]:
    thread: dict[str, Any] = (await gateway.http.get(f"/threads/{thread_id}")).json()
    return thread


async def _assert_done_once(gateway: Gateway, thread_id: str, emails: int) -> dict[str, Any]:
    """The thread ran r1 (asked) and r2 (resumed) once each, with one result per tool
    call, ``emails`` emails in its outbox and an intact record."""
    thread = await _thread(gateway, thread_id)
    assert [(r["runId"], r["status"]) for r in thread["runs"]] == [
        ("r1", "interrupted"),
        ("r2", "succeeded"),
    ]
    assert thread["interrupts"] == []
    assert len(thread["state"]["outbox"]) == emails
    results = [m["toolCallId"] for m in thread["messages"] if m["role"] == "tool"]
    assert len(results) == len(set(results)) == emails
    assert_intact(await thread_log(gateway.http, thread_id))
    return thread


async def test_a_worker_killed_while_waiting_and_mid_resume(
    client: Client, receiver: Receiver
) -> None:
    async with engine(_address(client), AGUI_DEMO_MAIL_URL=receiver.url) as stack:
        worker = stack.start_worker()
        gateway = await stack.start_gateway()
        thread_id, interrupts = await _ask_approval_and_form(gateway)

        # Killed with the interrupts pending: another worker finds them as they were.
        await at_rest(client, thread_id)
        await worker.kill()
        worker = stack.start_worker()
        assert (await _thread(gateway, thread_id))["interrupts"] == interrupts

        # Killed while the approved email is being sent.
        receiver.hold()
        resume = asyncio.create_task(
            post_run(gateway.http, "demo", _approve_all(thread_id, interrupts))
        )
        await receiver.wait_for(1)
        await worker.kill()
        stack.start_worker()
        receiver.release()

        events = await resume
        assert events[-1]["outcome"] == {"type": "success"}
        thread = await _assert_done_once(gateway, thread_id, emails=1)
        assert thread["state"]["filings"] == [FILING]
        # The new worker sent the email again (at least once), with the same key.
        assert len(receiver.deliveries) == 2
        assert len(receiver.keys()) == 1
        assert receiver.deliveries[0].body == {
            "to": "ann@example.com",
            "subject": "Hi",
            "body": "mail ann@example.com, quarterly",
        }


CHOSEN = ["disk-scratch-2024", "snapshot-db-nightly-03"]
"""Two of the four resources the ops example finds: what the person approves deleting."""


async def _ask_cleanup(gateway: Gateway) -> tuple[str, dict[str, Any]]:
    """A new ops thread waiting on the approval of its cleanup; that interrupt."""
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "clean up old resources")
    events = await post_run(gateway.http, "ops", body)
    [approval] = events[-1]["outcome"]["interrupts"]
    assert approval["subagentRunId"].startswith(f"agui-subagent-{thread_id}-cleanup-")
    return thread_id, approval


def _approve_chosen(thread_id: str, approval: dict[str, Any]) -> dict[str, Any]:
    payload = {"approved": True, "resources": CHOSEN}
    entry = {"interruptId": approval["id"], "status": "resolved", "payload": payload}
    return {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}


async def _completed_activities(client: Client, workflow_id: str) -> list[str]:
    """The activities that completed in the runs of ``workflow_id``, by type, in order."""
    completed = []
    async for _, events in workflow_run_histories(client, workflow_id):
        scheduled = {
            e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
            for e in events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        }
        completed += [
            scheduled[e.activity_task_completed_event_attributes.scheduled_event_id]
            for e in events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        ]
    return completed


async def _assert_cleaned_up_once(client: Client, gateway: Gateway, thread_id: str) -> None:
    """The thread ran r1 (asked) and r2 (resumed) once each; its inspector and its
    cleanup each took every step once, and the cleanup deleted exactly what was chosen."""
    thread = await _thread(gateway, thread_id)
    assert [(r["runId"], r["status"]) for r in thread["runs"]] == [
        ("r1", "interrupted"),
        ("r2", "succeeded"),
    ]
    assert thread["interrupts"] == []
    subagents = {s["agent"]: s for s in thread["subagents"]}
    assert {agent: s["status"] for agent, s in subagents.items()} == {
        "inspector": "succeeded",
        "cleanup": "succeeded",
    }
    inspector = await _completed_activities(client, subagents["inspector"]["subagentRunId"])
    assert inspector == [
        "model:ops-inspector",
        "tool:list_old_resources",
        "model:ops-inspector",
    ]
    cleanup = await _completed_activities(client, subagents["cleanup"]["subagentRunId"])
    assert cleanup == [
        "model:ops-cleanup",
        "tool:delete_resources",
        "model:ops-cleanup",
    ]
    deleted = [json.loads(m["content"]) for m in thread["messages"] if m["role"] == "tool"][-1]
    assert deleted == {"deleted": CHOSEN}
    answer = f"Deleted 2 resources: {', '.join(CHOSEN)}."
    assert thread["messages"][-1] == {
        **thread["messages"][-1],
        "role": "assistant",
        "content": answer,
    }
    assert_intact(await thread_log(gateway.http, thread_id))


async def test_a_worker_killed_while_ops_waits_for_the_cleanups_approval(client: Client) -> None:
    async with engine(_address(client)) as stack:
        worker = stack.start_worker()
        gateway = await stack.start_gateway()
        thread_id, approval = await _ask_cleanup(gateway)

        # The inspector has answered; the hook before the cleanup waits on the approval.
        await at_rest(client, thread_id)
        await worker.kill()
        stack.start_worker()
        assert (await _thread(gateway, thread_id))["interrupts"] == [approval]

        events = await post_run(gateway.http, "ops", _approve_chosen(thread_id, approval))
        assert events[-1]["outcome"] == {"type": "success"}
        await _assert_cleaned_up_once(client, gateway, thread_id)


CRASH_WORKER = ("-m", "tests.crash_worker")
"""A worker whose ops cleanup posts each deletion to ``OPS_DELETIONS_URL`` first, and
which serves ``treasurer``."""


async def test_a_worker_killed_mid_way_through_the_cleanup_sub_agent(
    client: Client, receiver: Receiver
) -> None:
    async with engine(_address(client), OPS_DELETIONS_URL=receiver.url) as stack:
        worker = stack.start_worker(CRASH_WORKER)
        gateway = await stack.start_gateway()
        thread_id, approval = await _ask_cleanup(gateway)

        # Killed while the cleanup sub-agent deletes: its child workflow has run its
        # model and waits on the deletion, which this worker is running.
        receiver.hold()
        resume = asyncio.create_task(
            post_run(gateway.http, "ops", _approve_chosen(thread_id, approval))
        )
        await receiver.wait_for(1)
        await worker.kill()
        stack.start_worker(CRASH_WORKER)
        receiver.release()

        events = await resume
        assert events[-1]["outcome"] == {"type": "success"}
        [deleted] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
        assert deleted["subagentRunId"] == approval["subagentRunId"]
        await _assert_cleaned_up_once(client, gateway, thread_id)
        # The new worker deleted again (at least once), with the same key: one deletion.
        assert len(receiver.deliveries) == 2
        assert len(receiver.keys()) == 1
        assert receiver.deliveries[0].body == {"names": CHOSEN}


async def test_a_worker_killed_while_a_sub_agent_run_waits_for_its_answer(
    client: Client,
) -> None:
    async with engine(_address(client)) as stack:
        # A gateway process serves the examples only; this one serves treasurer too.
        settings = Settings(task_queue=stack.task_queue, auth_hs256_secret=TEST_SECRET)
        async with serve_gateway(settings, client, AGENTS) as url, gateway_client(url) as http:
            worker = stack.start_worker(CRASH_WORKER)
            thread_id = new_thread()
            body = run_input(thread_id, "r1", "transfer 50 to Robin")
            events = await post_run(http, "treasurer", body)
            [question] = events[-1]["outcome"]["interrupts"]
            child = question["subagentRunId"]
            assert child.startswith(f"agui-subagent-{thread_id}-transfer-")

            async def waiting() -> bool:
                """The sub-agent run continued as new, and its new run waits."""
                runs = [events async for _, events in workflow_run_histories(client, child)]
                return len(runs) == 2 and any(
                    e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in runs[1]
                )

            await eventually(waiting, what="the sub-agent run to wait for its answer")
            await worker.kill()
            stack.start_worker(CRASH_WORKER)

            approve = {"status": "resolved", "payload": {"approved": True}}
            entry = {"interruptId": question["id"], **approve}
            resume = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}
            done = await post_run(http, "treasurer", resume)
            assert done[-1]["outcome"] == {"type": "success"}

            thread = (await http.get(f"/threads/{thread_id}")).json()
            [record] = thread["subagents"]
            assert (record["subagentRunId"], record["status"]) == (child, "succeeded")
            # Each model answered once per step. The tool ran twice, as a tool that asks
            # from inside does: asking, then again with the answer.
            own = await _completed_activities(client, workflow_id_for(thread_id))
            assert own == ["model:treasurer", "model:treasurer"]
            assert await _completed_activities(client, child) == [
                "model:transfer",
                "tool:transfer_money",
                "tool:transfer_money",
                "model:transfer",
            ]
            answer = thread["messages"][-1]["content"]
            assert answer.startswith("The transfer agent says: Sent 50 to Robin; confirmation")
            assert_intact(await thread_log(http, thread_id))


async def test_a_gateway_killed_mid_stream_another_gateway_serves_the_rest(
    client: Client,
) -> None:
    async with engine(_address(client)) as stack:
        first_gateway = await stack.start_gateway()
        second_gateway = await stack.start_gateway()
        settings = Settings(task_queue=stack.task_queue)
        thread_id = new_thread()
        # Workflow tasks only: the run starts, then waits for its model activity. Its
        # threads find their agents as build_worker's do.
        served.serve(stack.task_queue, EXAMPLES)
        async with Worker(client, task_queue=stack.task_queue, workflows=WORKFLOWS):
            body = run_input(thread_id, "r1", "hello")
            async with first_gateway.http.stream("POST", "/agents/demo", json=body) as response:
                messages = sse_messages(response)
                first = await anext(messages)
                assert first[1]["type"] == "RUN_STARTED"
                await first_gateway.process.kill()
                with pytest.raises(httpx.TransportError):
                    await anext(messages)

            url = f"/threads/{thread_id}/runs/r1/events"
            headers = {"Last-Event-ID": str(first[0])}
            async with second_gateway.http.stream("GET", url, headers=headers) as response:
                rest = sse_messages(response)
                async with Worker(
                    client, task_queue=stack.task_queue, activities=activities(settings, EXAMPLES)
                ):
                    received = [first, *[message async for message in rest]]

            # Every event exactly once, in order: what the thread recorded for the run.
            assert received == await thread_log(second_gateway.http, thread_id)
            assert_intact(received)
            assert received[-1][1]["outcome"] == {"type": "success"}


async def test_the_temporal_server_killed_with_interrupts_pending(
    tmp_path: Path, receiver: Receiver
) -> None:
    server = DevServer(tmp_path / "temporal.sqlite")
    client = await server.start()
    try:
        await ensure_search_attributes(client)
        async with engine(server.address, AGUI_DEMO_MAIL_URL=receiver.url) as stack:
            worker = stack.start_worker()
            gateway = await stack.start_gateway()
            thread_id, interrupts = await _ask_approval_and_form(gateway)

            await server.kill()
            assert (await gateway.http.get("/healthz")).status_code == 503
            await server.start()

            # The same worker and gateway processes carry on against the restarted server.
            await wait_until_healthy(gateway.http, what="the gateway to see Temporal again")
            assert (await _thread(gateway, thread_id))["interrupts"] == interrupts
            events = await post_run(gateway.http, "demo", _approve_all(thread_id, interrupts))
            assert events[-1]["outcome"] == {"type": "success"}
            await _assert_done_once(gateway, thread_id, emails=1)
            assert len(receiver.deliveries) == len(receiver.keys()) == 1
            assert worker.alive and gateway.process.alive
    finally:
        await server.stop()


THREADS = 20


async def _run_with_failover(
    gateways: list[Gateway], first: int, body: Any, failovers: list[str]
) -> list[Any]:
    """POST a run; on a broken connection send the same request to the next gateway, as
    a client that knows both addresses does. The same request is the same run."""
    for attempt in range(2 * len(gateways)):
        gateway = gateways[(first + attempt) % len(gateways)]
        try:
            return await post_run(gateway.http, "demo", body)
        except httpx.TransportError:
            failovers.append(body["threadId"])
    raise AssertionError("no gateway answered")


async def test_two_workers_and_two_gateways_lose_one_each_midway(
    client: Client, receiver: Receiver
) -> None:
    async with engine(_address(client), AGUI_DEMO_MAIL_URL=receiver.url) as stack:
        workers = [stack.start_worker(), stack.start_worker()]
        gateways = [await stack.start_gateway(), await stack.start_gateway()]
        threads = [new_thread() for _ in range(THREADS)]

        failovers: list[str] = []
        asked = await asyncio.gather(
            *(
                _run_with_failover(
                    gateways, i, run_input(t, "r1", f"mail user{i}@example.com"), failovers
                )
                for i, t in enumerate(threads)
            )
        )
        # Every thread is mid-resume, its email held at the mail endpoint, when one
        # worker and one gateway die.
        receiver.hold()
        resumes = [
            asyncio.create_task(
                _run_with_failover(
                    gateways,
                    i + 1,
                    _approve_all(t, events[-1]["outcome"]["interrupts"]),
                    failovers,
                )
            )
            for i, (t, events) in enumerate(zip(threads, asked, strict=True))
        ]
        await receiver.wait_for(THREADS)
        await workers[0].kill()
        await gateways[0].process.kill()
        receiver.release()

        for events in await asyncio.gather(*resumes):
            assert events[-1]["outcome"] == {"type": "success"}
        # The resumes sent to the killed gateway were retried on the other one.
        assert sorted(failovers) == sorted(threads[1::2])
        for i, thread_id in enumerate(threads):
            thread = await _assert_done_once(gateways[1], thread_id, emails=1)
            assert thread["state"]["outbox"][0]["to"] == f"user{i}@example.com"
        # The killed worker held some of the emails in flight (the task queue spreads
        # threads over both workers); its threads sent theirs again, with the same key:
        # one email per thread.
        assert len(receiver.deliveries) > THREADS
        assert len(receiver.keys()) == THREADS
        assert {d.body["to"] for d in receiver.deliveries} == {
            f"user{i}@example.com" for i in range(THREADS)
        }


def _children(parent: int) -> dict[str, int]:
    """``{"worker": pid, "gateway": pid}`` among ``parent``'s child processes."""
    found = {}
    for pid, argv in child_processes(parent).items():
        name = "worker" if b"worker.py" in argv else "gateway" if b"gateway" in argv else None
        if name:
            found[name] = pid
    return found


async def test_make_run_restarts_a_killed_worker_and_gateway(client: Client) -> None:
    """``scripts/run.py`` (what ``make run`` runs), against an existing Temporal server."""
    port = free_port()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": _address(client),
        "AGUI_TASK_QUEUE": f"tq-{uuid.uuid4()}",
        "AGUI_GATEWAY_PORT": str(port),
        "AGUI_AUTH_HS256_SECRET": TEST_SECRET,
    }
    launcher = subprocess.Popen([sys.executable, "scripts/run.py"], cwd=ROOT, env=env)
    try:
        async with gateway_client(f"http://127.0.0.1:{port}") as http:
            await wait_until_healthy(http, timeout=60, what="make run's gateway")
            thread_id = new_thread()
            events = await post_run(http, "demo", run_input(thread_id, "r1", "mail a@example.com"))
            interrupts = events[-1]["outcome"]["interrupts"]

            before = _children(launcher.pid)
            assert before.keys() == {"worker", "gateway"}
            for pid in before.values():
                os.kill(pid, signal.SIGKILL)

            async def replaced() -> bool:
                after = _children(launcher.pid)
                return after.keys() == before.keys() and not set(after.values()) & set(
                    before.values()
                )

            await eventually(replaced, timeout=30, what="both processes to be restarted")
            await wait_until_healthy(http, timeout=60, what="the restarted gateway")
            events = await post_run(http, "demo", _approve_all(thread_id, interrupts))
            assert events[-1]["outcome"] == {"type": "success"}
    finally:
        launcher.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(launcher.wait, 60)
    assert code == 0
