"""Threads outlive every process: the server, the worker and the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from temporalio.client import Client

from settings import Settings
from tests.helpers import (
    ARRIVAL_SECONDS,
    TEST_SECRET,
    Stream,
    assert_valid_stream,
    eventually,
    free_port,
    gateway_client,
    post_run,
    read_sse,
    run_input,
    serve_gateway,
    serve_stack,
    start_dev_server,
    wait_until_healthy,
)
from tests.processes import engine
from worker import build_worker
from workflows.agents import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent


async def test_a_thread_survives_a_restart_of_everything(tmp_path: Path) -> None:
    database = tmp_path / "temporal.sqlite"
    thread_id = f"thread-{uuid.uuid4()}"
    task_queue = f"tq-{uuid.uuid4()}"

    server = await start_dev_server(database)
    async with serve_stack(server.client, task_queue) as stack:
        await post_run(stack.http, "demo", run_input(thread_id, "r1", "before"))
        before = (await stack.http.get(f"/threads/{thread_id}")).json()
    await server.shutdown()

    server = await start_dev_server(database)
    try:
        async with serve_stack(server.client, task_queue) as stack:
            after = (await stack.http.get(f"/threads/{thread_id}")).json()
            assert after == before
            assert [m["content"] for m in after["messages"]] == ["before", "You said: before"]

            body = run_input(thread_id, "r2", "before", "after")
            body["messages"].insert(1, after["messages"][1])
            events = await post_run(stack.http, "demo", body)
            assert events[-1]["outcome"] == {"type": "success"}
            thread = (await stack.http.get(f"/threads/{thread_id}")).json()
            assert [m["content"] for m in thread["messages"]] == [
                "before",
                "You said: before",
                "after",
                "You said: after",
            ]
    finally:
        await server.shutdown()


async def test_the_gateway_reports_temporal_down_and_recovers_when_it_returns() -> None:
    port = free_port()
    os.environ["TEMPORAL_ADDRESS"] = f"127.0.0.1:{port}"
    try:
        # No client handed in: the gateway connects lazily, as in production.
        async with serve_stack(None) as stack:
            health = await stack.http.get("/healthz")
            assert health.status_code == 503
            assert health.json()["status"] == "unavailable"
            body = run_input(f"thread-{uuid.uuid4()}", "r1", "hello")
            response = await stack.http.post("/agents/demo", json=body)
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "TEMPORAL_UNAVAILABLE"

            server = await start_dev_server(port=port)
            try:
                async with serve_stack(server.client) as worker_side:

                    async def healthy() -> bool:
                        return (await stack.http.get("/healthz")).status_code == 200

                    await eventually(healthy, what="the gateway to see Temporal again")
                    # Route the run to the worker's task queue through a gateway that
                    # shares the recovered lazy client's server.
                    events = await post_run(worker_side.http, "demo", body)
                    assert events[-1]["outcome"] == {"type": "success"}
            finally:
                await server.shutdown()
    finally:
        del os.environ["TEMPORAL_ADDRESS"]


GATEWAY_SHUTDOWN_SECONDS = 1
"""The stopping gateway's grace for its streams in the test below (5 s by default)."""


async def test_a_gateway_stops_on_sigterm_with_a_follower_open(client: Client) -> None:
    """A follower's stream does not end on its own. On SIGTERM the gateway gives open
    streams ``AGUI_GATEWAY_SHUTDOWN_SECONDS``, then closes them and exits; before, it
    waited for them for ever, and a process manager had to kill it."""
    async with engine(
        client.service_client.config.target_host,
        AGUI_GATEWAY_SHUTDOWN_SECONDS=str(GATEWAY_SHUTDOWN_SECONDS),
    ) as stack:
        stack.start_worker()
        gateway = await stack.start_gateway()
        thread_id = f"t-{uuid.uuid4()}"
        ran = await post_run(gateway.http, "demo", run_input(thread_id, "r1", "hi"))
        async with gateway.http.stream("GET", f"/threads/{thread_id}/events") as response:
            follower = Stream(response)
            try:
                await follower.until(
                    lambda: len(follower.messages) == len(ran), "the follower to read the run"
                )
                code = await gateway.process.stop(timeout=GATEWAY_SHUTDOWN_SECONDS + 15)
                with contextlib.suppress(httpx.TransportError):
                    await follower.end(ARRIVAL_SECONDS)
            finally:
                follower.close()
    # uvicorn shuts down, then re-raises the signal it caught.
    assert code == -signal.SIGTERM
    assert [event for _, event in follower.messages] == ran


async def test_worker_and_gateway_processes_serve_runs_and_stop_cleanly_on_sigterm(
    client: Client,
) -> None:
    gateway_port = free_port()
    worker_metrics = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "AGUI_TASK_QUEUE": f"tq-{uuid.uuid4()}",
        "AGUI_GATEWAY_PORT": str(gateway_port),
        "AGUI_AUTH_HS256_SECRET": TEST_SECRET,
        "AGUI_METRICS_BIND_ADDRESS": worker_metrics,
        "AGUI_LOG_FORMAT": "json",
    }
    thread_id = f"t-{uuid.uuid4()}"
    processes = [
        subprocess.Popen(argv, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        for argv in ([sys.executable, "worker.py"], [sys.executable, "-m", "gateway"])
    ]
    try:
        async with gateway_client(f"http://127.0.0.1:{gateway_port}") as http:
            await wait_until_healthy(http, what="the gateway process")
            events = await post_run(http, "demo", run_input(thread_id, "r1", "hi"))
            assert events[-1]["outcome"] == {"type": "success"}
            # Each process serves Prometheus metrics: the gateway its own and its
            # client's, the worker the SDK's and the workflows'.
            gateway_metrics = (await http.get("/metrics")).text
            assert "agui_gateway_runs_total{" in gateway_metrics
            assert "temporal_request_total{" in gateway_metrics
            worker_side = (await http.get(f"http://{worker_metrics}/metrics")).text
            assert "temporal_workflow_task_execution_latency_count{" in worker_side
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        logs = await asyncio.gather(
            *(asyncio.to_thread(p.communicate, timeout=30) for p in processes)
        )
    # uvicorn shuts down gracefully, then re-raises the signal it caught.
    assert [p.returncode for p in processes] == [0, -signal.SIGTERM]

    # Both log one JSON object per line, tagged with the thread and the run.
    worker_log, gateway_log = ([json.loads(line) for line in err.splitlines()] for _, err in logs)
    started = [r for r in worker_log if r["message"].startswith("run started")]
    assert [(r["threadId"], r["runId"]) for r in started] == [(thread_id, "r1")]
    assert started[0]["temporal"]["workflow_type"] == "ThreadWorkflow"
    (streamed,) = [r for r in gateway_log if r["message"] == "run streamed"]
    assert streamed | {"time": None} == {
        "time": None,
        "level": "INFO",
        "logger": "agui.gateway",
        "message": "run streamed",
        "threadId": thread_id,
        "runId": "r1",
        "agent": "demo",
        "outcome": "success",
    }


async def test_a_pending_interrupt_survives_a_restart_of_everything(tmp_path: Path) -> None:
    database = tmp_path / "temporal.sqlite"
    thread_id = f"thread-{uuid.uuid4()}"
    task_queue = f"tq-{uuid.uuid4()}"

    server = await start_dev_server(database)
    async with serve_stack(server.client, task_queue) as stack:
        events = await post_run(
            stack.http, "demo", run_input(thread_id, "r1", "mail a@b.com, quarterly")
        )
        interrupts = events[-1]["outcome"]["interrupts"]
    await server.shutdown()

    server = await start_dev_server(database)
    try:
        async with serve_stack(server.client, task_queue) as stack:
            thread = (await stack.http.get(f"/threads/{thread_id}")).json()
            # Same ids, reasons and deadlines as before the restart.
            assert thread["interrupts"] == interrupts
            approval, form = interrupts
            events = await post_run(
                stack.http,
                "demo",
                {
                    "threadId": thread_id,
                    "runId": "r2",
                    "messages": [],
                    "resume": [
                        {
                            "interruptId": approval["id"],
                            "status": "resolved",
                            "payload": {"approved": True},
                        },
                        {"interruptId": form["id"], "status": "cancelled"},
                    ],
                },
            )
            assert events[-1]["outcome"] == {"type": "success"}
            thread = (await stack.http.get(f"/threads/{thread_id}")).json()
            assert len(thread["state"]["outbox"]) == 1
            assert thread["interrupts"] == []
    finally:
        await server.shutdown()


async def _served(send: Callable[[], Awaitable[httpx.Response]]) -> httpx.Response:
    """``send()``'s response once a worker takes the request, sending it again after
    each 503, as the 503 asks: a worker just started may take longer than
    ``accept_seconds`` over its first task on a busy machine."""
    response: httpx.Response | None = None

    async def taken() -> bool:
        nonlocal response
        response = await send()
        return response.status_code != 503

    await eventually(taken, what="a worker to take the request")
    assert response is not None
    return response


async def test_a_run_or_decision_no_worker_takes_is_answered_and_served_once_one_does(
    client: Client,
) -> None:
    # No worker polls this task queue until the test starts one.
    settings = Settings(
        task_queue=f"tq-{uuid.uuid4()}", auth_hs256_secret=TEST_SECRET, accept_seconds=0.5
    )
    async with serve_gateway(settings, client) as url, gateway_client(url) as http:
        thread_id = f"thread-{uuid.uuid4()}"
        body = run_input(thread_id, "r1", "mail a@b.com")
        refused = await http.post("/agents/demo", json=body)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "THREAD_UNAVAILABLE"
        assert refused.headers["Retry-After"]

        async with build_worker(client, settings, EXAMPLES):
            ran = await _served(lambda: http.post("/agents/demo", json=body))
            events = [event for _, event in await read_sse(ran)]
        assert_valid_stream(events, thread_id)
        [approval] = events[-1]["outcome"]["interrupts"]
        decisions = f"/threads/{thread_id}/interrupts/{approval['id']}/decisions"
        decision = {"status": "resolved", "payload": {"approved": True}}
        refused = await http.post(decisions, json=decision)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "THREAD_UNAVAILABLE"

        async with build_worker(client, settings, EXAMPLES):
            settled = await _served(lambda: http.post(decisions, json=decision))
            assert settled.status_code == 200, settled.text
            assert settled.json()["outcome"] in {"settled", "repeated"}
            view = (await http.get(f"/threads/{thread_id}")).json()
        # The run sent twice ran once; the decision sent twice settled the interrupt once,
        # the agent going on in one run of its own.
        assert [run["runId"] for run in view["runs"]] == ["r1", settled.json()["runId"]]
        assert view["interrupts"] == []
