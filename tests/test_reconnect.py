"""Streams that survive the network: SSE ids, and reading a run again from any of them."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.worker import Worker

from settings import Settings
from tests.helpers import (
    TEST_SECRET,
    SseEvent,
    Stack,
    eventually,
    gateway_client,
    new_thread,
    post_run_sse,
    read_sse,
    run_input,
    serve_gateway,
    sse_messages,
)
from worker import WORKFLOWS, activities
from workflows import served
from workflows.agents import EXAMPLES


async def get_events(
    http: httpx.AsyncClient, thread_id: str, run_id: str, **options: Any
) -> list[SseEvent]:
    """``GET /threads/{thread_id}/runs/{run_id}/events`` read to its end."""
    url = f"/threads/{thread_id}/runs/{run_id}/events"
    async with http.stream("GET", url, **options) as response:
        return await read_sse(response)


async def test_every_event_carries_its_position_in_the_thread_as_its_id(stack: Stack) -> None:
    thread_id = new_thread()
    first = await post_run_sse(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    second = await post_run_sse(stack.http, "demo", run_input(thread_id, "r2", "hello", "again"))

    ids = [event_id for event_id, _ in first + second]
    assert all(event_id is not None and event_id.isdigit() for event_id in ids), ids
    positions = [int(event_id) for event_id in ids if event_id is not None]
    assert positions == sorted(set(positions)), "ids increase across the thread's runs"


async def test_a_lost_stream_continues_after_its_last_event_id_exactly_once(
    stack: Stack,
) -> None:
    thread_id = new_thread()
    body = run_input(thread_id, "r1", "mail a@b.com and c@d.com")
    original = await post_run_sse(stack.http, "demo", body)
    last_seen, _ = original[3]  # the connection dropped after the fourth event

    by_header = await get_events(
        stack.http, thread_id, "r1", headers={"Last-Event-ID": str(last_seen)}
    )
    by_query = await get_events(stack.http, thread_id, "r1", params={"after": last_seen})

    assert by_header == original[4:]
    assert by_query == original[4:]
    assert by_header[-1][1]["outcome"]["type"] == "interrupt"


async def test_a_finished_run_can_be_read_again_whole(stack: Stack) -> None:
    thread_id = new_thread()
    original = await post_run_sse(stack.http, "demo", run_input(thread_id, "r1", "hello"))

    assert await get_events(stack.http, thread_id, "r1") == original


async def test_a_reused_run_id_names_the_latest_run(stack: Stack) -> None:
    thread_id = new_thread()
    paused = await post_run_sse(stack.http, "demo", run_input(thread_id, "r1", "confirm"))
    [interrupt] = paused[-1][1]["outcome"]["interrupts"]
    # CopilotKit-style: the resume reuses the interrupted run's runId.
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": True}]
    resumed = await post_run_sse(
        stack.http, "demo", run_input(thread_id, "r1", "confirm", resume=resume)
    )

    assert await get_events(stack.http, thread_id, "r1") == resumed
    assert resumed[-1][1]["outcome"] == {"type": "success"}


async def test_a_client_attaches_to_a_run_in_flight_and_gets_its_live_rest(
    client: Client,
) -> None:
    settings = Settings(task_queue=f"tq-{uuid.uuid4()}", auth_hs256_secret=TEST_SECRET)
    thread_id = new_thread()
    # A worker for workflow tasks only: the run starts, then waits on its model activity.
    # Its threads find their agents as build_worker's do.
    served.serve(settings.task_queue, EXAMPLES)
    async with (
        Worker(client, task_queue=settings.task_queue, workflows=WORKFLOWS),
        serve_gateway(settings, client) as url,
        gateway_client(url) as http,
    ):
        posted = asyncio.create_task(
            post_run_sse(http, "demo", run_input(thread_id, "r1", "hello"))
        )

        async def running() -> bool:
            response = await http.get(f"/threads/{thread_id}")
            return response.status_code == 200 and response.json()["status"] == "running"

        await eventually(running, what="the run to start")
        url = f"/threads/{thread_id}/runs/r1/events"
        async with http.stream("GET", url) as response:
            messages = sse_messages(response)
            first = await anext(messages)
            assert first[1]["type"] == "RUN_STARTED"
            # Only now can the run finish: activities get a worker.
            async with Worker(
                client, task_queue=settings.task_queue, activities=activities(settings, EXAMPLES)
            ):
                attached = [first, *[message async for message in messages]]
                original = await posted

    assert attached == original
    assert attached[-1][1]["outcome"] == {"type": "success"}


async def test_reading_what_does_not_exist_is_a_clear_error(stack: Stack) -> None:
    thread_id = new_thread()
    await post_run_sse(stack.http, "demo", run_input(thread_id, "r1", "hello"))

    cases = [
        (f"/threads/{new_thread()}/runs/r1/events", {}, 404, "UNKNOWN_THREAD"),
        (f"/threads/{thread_id}/runs/nope/events", {}, 404, "UNKNOWN_RUN"),
        (f"/threads/{thread_id}/runs/r1/events", {"after": "x"}, 422, "INVALID_EVENT_ID"),
    ]
    for url, params, status, code in cases:
        response = await stack.http.get(url, params=params)
        assert response.status_code == status, response.text
        assert response.json()["error"]["code"] == code
