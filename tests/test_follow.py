"""``GET /threads/{threadId}/events``: a client follows a whole thread, across runs,
whoever starts them (its owner in another request, an expiry, an operator), from any
event id on, and the stream stays open while the thread waits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from ag_ui.core import ResumeEntry
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryRejectedError
from temporalio.common import QueryRejectCondition

from bench.reads import ReadCount, counted
from gateway import streaming
from gateway.streaming import READ_TIMEOUT, thread_handle
from tests.helpers import (
    OWNER,
    SseEvent,
    Stack,
    assert_valid_stream,
    at_rest,
    bearer,
    eventually,
    gateway_client,
    new_thread,
    post_run_sse,
    run_input,
    serve_stack,
    sse_messages,
    thread_log,
)
from tests.processes import engine
from workflows.models import LogPage, LogQuery, OperatorResume
from workflows.thread import ThreadWorkflow

ARRIVAL_SECONDS = 15.0
"""How long a followed event may take to arrive before the test fails."""


@pytest.fixture(scope="module")
async def quick(client: Client) -> AsyncIterator[Stack]:
    """A stack whose followers read an idle thread often, so tests wait less."""
    async with serve_stack(client, follow_poll_seconds=0.1) as running:
        yield running


def _follow(http: httpx.AsyncClient, thread_id: str, **options: Any) -> Any:
    """``GET /threads/{thread_id}/events``, as a stream to read while it stays open."""
    return http.stream("GET", f"/threads/{thread_id}/events", **options)


async def _next(messages: AsyncIterator[SseEvent]) -> SseEvent:
    return await asyncio.wait_for(anext(messages), ARRIVAL_SECONDS)


async def _take(messages: AsyncIterator[SseEvent], count: int) -> list[SseEvent]:
    return [await _next(messages) for _ in range(count)]


async def _take_run(messages: AsyncIterator[SseEvent]) -> list[SseEvent]:
    """The next whole run the follower gets: ``RUN_STARTED`` to its terminal event."""
    run = [await _next(messages)]
    assert run[0][1]["type"] == "RUN_STARTED", run
    while run[-1][1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
        run.append(await _next(messages))
    return run


def _assert_valid_runs(runs: list[list[SseEvent]]) -> None:
    """Each run is a valid AG-UI stream, and their ids count up by one, with no gap."""
    for run in runs:
        assert_valid_stream([event for _, event in run])
    ids = [int(event_id or 0) for run in runs for event_id, _ in run]
    assert ids == list(range(ids[0], ids[0] + len(ids))), ids


def _answer(interrupt: dict[str, Any], payload: Any = True) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}


async def test_a_follower_sees_every_run_of_the_thread_whoever_starts_it(
    client: Client, quick: Stack
) -> None:
    http = quick.http
    thread_id = new_thread()
    asked = await post_run_sse(http, "demo", run_input(thread_id, "r1", "confirm"))
    last_id, finished = asked[-1]
    [confirm] = finished["outcome"]["interrupts"]

    async with _follow(http, thread_id, headers={"Last-Event-ID": last_id}) as response:
        messages = sse_messages(response)

        # The owner resumes in another request: the follower gets that run as it ran.
        body = run_input(thread_id, "r2", "confirm", resume=[_answer(confirm)])
        resumed = await post_run_sse(http, "demo", body)
        assert await _take_run(messages) == resumed
        assert resumed[-1][1]["outcome"] == {"type": "success"}

        # A run no client started: an operator's resume of the next question.
        asked_again = await post_run_sse(
            http, "demo", run_input(thread_id, "r3", "confirm", "confirm again")
        )
        assert await _take_run(messages) == asked_again
        [again] = asked_again[-1][1]["outcome"]["interrupts"]
        operator = OperatorResume(
            operator="ops",
            resume=[ResumeEntry(interrupt_id=again["id"], status="resolved", payload=False)],
        )
        result = await thread_handle(client, thread_id).execute_update(
            ThreadWorkflow.operator_resume, operator
        )
        by_operator = await _take_run(messages)
        assert by_operator[0][1]["runId"] == result.run_id
        assert by_operator[-1][1]["outcome"] == {"type": "success"}

        # Another: the thread's own run when a question's deadline passes.
        form = await post_run_sse(
            http,
            "demo",
            run_input(
                thread_id,
                "r4",
                "confirm",
                "confirm again",
                "quarterly",
                forwardedProps={"expiresInSeconds": 1},
            ),
        )
        assert await _take_run(messages) == form
        expiry = await _take_run(messages)
        assert expiry[0][1]["runId"].startswith("expiry-")
        assert expiry[-1][1]["outcome"] == {"type": "success"}

    _assert_valid_runs([resumed, asked_again, by_operator, form, expiry])
    # All of it is the thread's log, as reading its runs back finds it.
    log = await thread_log(http, thread_id)
    followed = resumed + asked_again + by_operator + form + expiry
    assert log[len(asked) :] == followed


async def test_a_follower_resumes_exactly_after_its_last_event_id(quick: Stack) -> None:
    http = quick.http
    thread_id = new_thread()
    first = await post_run_sse(http, "demo", run_input(thread_id, "r1", "confirm"))
    [confirm] = first[-1][1]["outcome"]["interrupts"]
    body = run_input(thread_id, "r2", "confirm", resume=[_answer(confirm)])
    second = await post_run_sse(http, "demo", body)
    log = first + second

    for cut in (0, 3, len(first) - 1, len(first), len(log) - 2):
        last_id = log[cut][0]
        assert last_id is not None
        for options in ({"params": {"after": last_id}}, {"headers": {"Last-Event-ID": last_id}}):
            async with _follow(http, thread_id, **options) as response:
                messages = sse_messages(response)
                assert await _take(messages, len(log) - cut - 1) == log[cut + 1 :]
    # With neither, the whole log; and what comes next is the next run, nothing repeated.
    async with _follow(http, thread_id) as response:
        messages = sse_messages(response)
        assert await _take(messages, len(log)) == log
        third = await post_run_sse(http, "demo", run_input(thread_id, "r3", "confirm", "hi"))
        assert await _take_run(messages) == third
    assert int(third[0][0] or 0) == int(second[-1][0] or 0) + 1


async def test_only_the_owner_and_admins_follow_a_thread(quick: Stack) -> None:
    thread_id = new_thread()
    run = await post_run_sse(quick.http, "demo", run_input(thread_id, "r1", "hello"))

    async with gateway_client(quick.url, "mallory") as other:
        response = await other.get(f"/threads/{thread_id}/events")
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "UNKNOWN_THREAD"
    headers = bearer("root", ["agui-admins"])
    async with (
        httpx.AsyncClient(base_url=quick.url, headers=headers, timeout=30) as admin,
        _follow(admin, thread_id) as response,
    ):
        assert await _take(sse_messages(response), len(run)) == run

    cases = [
        (f"/threads/{new_thread()}/events", {}, {}, 404, "UNKNOWN_THREAD"),
        (f"/threads/{thread_id}/events", {"after": "x"}, {}, 422, "INVALID_EVENT_ID"),
        (f"/threads/{thread_id}/events", {}, {"Last-Event-ID": "-1"}, 422, "INVALID_EVENT_ID"),
    ]
    for url, params, headers, status, code in cases:
        response = await quick.http.get(url, params=params, headers=headers)
        assert response.status_code == status, response.text
        assert response.json()["error"]["code"] == code


async def test_a_quiet_stream_sends_keepalives_and_gives_its_slot_back_when_left(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "KEEPALIVE_SECONDS", 0.2)
    async with serve_stack(client, follow_poll_seconds=0.05, max_streams_per_principal=1) as stack:
        thread_id = new_thread()
        await post_run_sse(stack.http, "demo", run_input(thread_id, "r1", "confirm"))
        last = str((await thread_log(stack.http, thread_id))[-1][0])

        async with _follow(stack.http, thread_id, params={"after": last}) as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            assert await asyncio.wait_for(anext(lines), ARRIVAL_SECONDS) == ": keepalive"
            # The follower holds the principal's one stream.
            busy = await stack.http.get(f"/threads/{thread_id}/events")
            assert busy.status_code == 429, busy.text

        async def slot_free() -> bool:
            async with _follow(stack.http, thread_id, params={"after": last}) as again:
                return again.status_code == 200

        await eventually(slot_free, what="the follower's slot to be given back")


async def test_a_followers_read_that_meets_the_run_its_thread_left_reads_the_next(
    client: Client, quick: Stack
) -> None:
    """Temporal can take a follower's query for the thread's current workflow run to the
    run the thread is just continuing as new from, and reject it as closed (a probe on
    the dev server, queries sent while a workflow continued as new again and again, met
    it every few continues-as-new). The follower then reads the next run, which carries
    the log on, instead of ending its stream; only a workflow closed for good ends it. A
    query for the thread's previous run is rejected the same way every time, so the test
    asks that one."""
    thread_id = new_thread()
    run = await post_run_sse(quick.http, "demo", run_input(thread_id, "r1", "confirm"))
    thread = thread_handle(client, thread_id)
    history = await thread.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id, "the quick stack continues as new after a run"
    left = client.get_workflow_handle(thread.id, run_id=started.continued_execution_run_id)
    with pytest.raises(WorkflowQueryRejectedError) as rejected:
        await left.query(
            ThreadWorkflow.log, LogQuery(after=0), reject_condition=QueryRejectCondition.NOT_OPEN
        )
    assert rejected.value.status == WorkflowExecutionStatus.CONTINUED_AS_NEW

    page = await streaming._read_open_log(client, left, 0)
    assert [(str(item.seq), item.event.type) for item in page.events] == [
        (event_id, event["type"]) for event_id, event in run
    ]
    assert page == await streaming.read_log(thread, 0)

    await thread.terminate("test")
    with pytest.raises(WorkflowQueryRejectedError) as closed:
        await streaming._read_open_log(client, left, 0)
    assert closed.value.status == WorkflowExecutionStatus.TERMINATED


async def test_a_follower_stream_ends_when_the_threads_workflow_is_gone(
    client: Client, quick: Stack
) -> None:
    thread_id = new_thread()
    run = await post_run_sse(quick.http, "demo", run_input(thread_id, "r1", "confirm"))

    async with _follow(quick.http, thread_id) as response:
        messages = sse_messages(response)
        assert await _take(messages, len(run)) == run
        await thread_handle(client, thread_id).terminate("test")
        rest = await asyncio.wait_for(_rest(messages), ARRIVAL_SECONDS)
    assert rest == []


async def _rest(messages: AsyncIterator[SseEvent]) -> list[SseEvent]:
    return [message async for message in messages]


async def test_reads_no_worker_answers_fail_in_time_and_a_follower_waits_them_out(
    client: Client,
) -> None:
    """With its worker gone (killed, or being replaced in a deploy), Temporal holds a read
    of a thread until a worker answers, for up to 30 s. A request's read gives up after
    ``READ_TIMEOUT`` with a 503 to retry; a follower's read gives up too, and its stream
    reads again until a worker is back. (Two threads: while a thread's worker is gone,
    Temporal holds one read of it at a time and refuses the others as too many.)"""
    async with engine(client.service_client.config.target_host) as stack:
        worker = stack.start_worker()
        gateway = await stack.start_gateway()
        followed_id, read_id = new_thread(), new_thread()
        run = await post_run_sse(gateway.http, "demo", run_input(followed_id, "r1", "confirm"))
        await post_run_sse(gateway.http, "demo", run_input(read_id, "r1", "confirm"))

        # A workflow task pending would hold the reads too, whatever the worker.
        for thread_id in (followed_id, read_id):
            await at_rest(client, thread_id)
        await worker.kill()

        reads = ReadCount()
        # A follower whose log has more to read reads at once: its first read with no worker.
        first = LogPage(owner=OWNER, events=[], more=True, running=False)
        followed = streaming.follow(counted(client, reads), followed_id, 0, first, 0.05, 0.1)
        page = asyncio.ensure_future(anext(followed))
        try:
            refused = await gateway.http.get(f"/threads/{read_id}", timeout=ARRIVAL_SECONDS + 10)
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "TEMPORAL_UNAVAILABLE"
            assert refused.headers["Retry-After"]

            async def read_again() -> bool:
                # A second read starts only once the first has failed and been waited out.
                return reads.reads.queries >= 2 or page.done()

            await eventually(
                read_again,
                timeout=READ_TIMEOUT.total_seconds() + ARRIVAL_SECONDS,
                what="the follower's read to give up",
            )
            assert not page.done(), "the follower gave up on the thread"

            stack.start_worker()
            events = await asyncio.wait_for(page, READ_TIMEOUT.total_seconds() + ARRIVAL_SECONDS)
        finally:
            page.cancel()
            await asyncio.wait({page})
        assert [(str(item.seq), item.event.type) for item in events] == [
            (event_id, event["type"]) for event_id, event in run
        ]
        assert (await gateway.http.get(f"/threads/{read_id}")).status_code == 200
