"""A run's stream stays open through what leaves it without events for a while: a model
thinking or a tool running (keepalives, so that proxies on the way do not close it as
idle), and its worker killed mid-reply (a read that no worker answers is waited out, as
a follower's is, until the worker that takes the thread over has the run go on)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from temporalio.client import Client, Interceptor, OutboundInterceptor, QueryWorkflowInput
from temporalio.service import RPCError

from activities.openai_chat import OpenAIModel
from bench.reads import counted
from gateway import streaming
from gateway.streaming import READ_TIMEOUT
from settings import Settings
from tests.chat_server import ChatServer, Reply
from tests.crash_worker import AGENTS, CHAT
from tests.helpers import (
    TEST_SECRET,
    SseEvent,
    assert_valid_stream,
    eventually,
    gateway_client,
    new_thread,
    run_input,
    serve_gateway,
    serve_stack,
    sse_messages,
    thread_log,
)
from tests.processes import engine
from workflows.sdk import AgentDefinition

ARRIVAL_SECONDS = 15.0
"""How long an awaited line of a stream may take before the test fails."""
KEEPALIVE = ": keepalive"


async def _lines_until(lines: AsyncIterator[str], *lasts: str) -> list[str]:
    """The stream's lines up to and including the first that holds ``lasts[0]``, then
    on to the first after it that holds ``lasts[1]``, and so on."""
    read: list[str] = []
    for last in lasts:
        read.append(await asyncio.wait_for(anext(lines), ARRIVAL_SECONDS))
        while last not in read[-1]:
            read.append(await asyncio.wait_for(anext(lines), ARRIVAL_SECONDS))
    return read


async def test_a_quiet_runs_stream_and_its_reconnect_send_keepalives(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "KEEPALIVE_SECONDS", 0.2)
    with ChatServer().serving() as server:
        agent = AgentDefinition(
            name="llm",
            description="An OpenAI-compatible model.",
            model=OpenAIModel(name="llm", base_url=server.base_url, api_key="k"),
        )
        async with serve_stack(client, agents=[agent]) as stack:
            # The model writes, then thinks for as long as the test holds it.
            server.script(Reply(text=["Hel", "lo."], hold_after=1))
            thread_id = new_thread()
            body = run_input(thread_id, "r1", "hi")
            async with stack.http.stream("POST", "/agents/llm", json=body) as response:
                assert response.status_code == 200
                lines = response.aiter_lines()
                # Keepalives may come before the first read, and do come while held.
                before = await _lines_until(lines, '"delta":"Hel"', KEEPALIVE)
                assert server.holding

                # A client reconnecting meanwhile gets the run so far, then keepalives too.
                url = f"/threads/{thread_id}/runs/r1/events"
                async with stack.http.stream("GET", url) as reconnected:
                    assert reconnected.status_code == 200
                    await _lines_until(reconnected.aiter_lines(), '"delta":"Hel"', KEEPALIVE)

                server.release()
                rest = [line async for line in lines]

    events = [e for _, e in await _parsed([*before, *rest])]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "Hello."
    assert_valid_stream(events, thread_id)


async def _parsed(lines: list[str]) -> list[SseEvent]:
    """The SSE messages of ``lines``, as :func:`sse_messages` reads them off a response."""
    body = "".join(f"{line}\n" for line in lines).encode()
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    return [message async for message in sse_messages(response)]


class FailedQueries(Interceptor):
    """Counts the queries made through a client that failed with an ``RPCError``."""

    def __init__(self) -> None:
        self.count = 0

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Failing(next, self)


class _Failing(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, failed: FailedQueries) -> None:
        super().__init__(next)
        self._failed = failed

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        try:
            return await self.next.query_workflow(input)
        except RPCError:
            self._failed.count += 1
            raise


async def test_a_runs_streams_wait_out_its_worker_killed_mid_reply(client: Client) -> None:
    """The worker is killed while the model's reply streams, so the next read of the
    run's stream, and of a reconnected client's, finds no worker; each fails after
    ``READ_TIMEOUT`` (Temporal alone would hold it 30 s and then fail the stream), or at
    once as one read too many of a thread whose worker is gone. The streams read again
    once a new worker has taken the thread over and retried the model call, as soon as
    its heartbeats stopped for the model's ``heartbeat`` (not its two-minute timeout),
    and end with the run's ``RUN_FINISHED``."""
    failed = FailedQueries()
    with ChatServer().serving() as server:
        server.script(
            Reply(text=[f"t{i} " for i in range(100)], interval_seconds=0.02),
            Reply(text=["Back."]),
        )
        address = client.service_client.config.target_host
        async with engine(
            address, AGUI_OPENAI_BASE_URL=server.base_url, AGUI_OPENAI_API_KEY="k"
        ) as stack:
            command = ("-m", "tests.crash_worker")
            worker = stack.start_worker(command)
            # Reads every 0.5 s while the reply streams: the kill lands between two.
            settings = Settings(
                task_queue=stack.task_queue,
                auth_hs256_secret=TEST_SECRET,
                stream_poll_seconds=0.5,
            )
            async with (
                serve_gateway(settings, counted(client, failed), AGENTS) as url,
                gateway_client(url) as http,
            ):
                thread_id = new_thread()
                body = run_input(thread_id, "r1", "hi")
                async with (
                    http.stream("POST", "/agents/chat", json=body) as response,
                    http.stream("GET", f"/threads/{thread_id}/runs/r1/events") as reconnected,
                ):
                    streams = [sse_messages(response), sse_messages(reconnected)]
                    streamed = [await _until_text(messages) for messages in streams]
                    await worker.kill()

                    async def reads_failed() -> bool:
                        return failed.count >= len(streams)

                    await eventually(
                        reads_failed,
                        timeout=READ_TIMEOUT.total_seconds() + ARRIVAL_SECONDS,
                        what="the streams' reads with no worker to fail",
                    )
                    stack.start_worker(command)
                    assert CHAT.model is not None and CHAT.model.heartbeat is not None
                    wait = READ_TIMEOUT.total_seconds() + CHAT.model.heartbeat.total_seconds()
                    for messages, sofar in zip(streams, streamed, strict=True):
                        sofar += await asyncio.wait_for(_rest(messages), wait + ARRIVAL_SECONDS)
                log = await thread_log(http, thread_id)
                assert streamed == [log, log]

    events = [event for _, event in log]
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert events[-1]["outcome"] == {"type": "success"}
    assert_valid_stream(events, thread_id)
    # The killed worker's attempt is left behind, closed; the retry's reply is the answer.
    assert len(server.requests) == 2


async def _until_text(messages: AsyncIterator[SseEvent]) -> list[SseEvent]:
    """A stream's messages up to its first ``TEXT_MESSAGE_CONTENT``."""
    read = [await asyncio.wait_for(anext(messages), ARRIVAL_SECONDS)]
    while read[-1][1]["type"] != "TEXT_MESSAGE_CONTENT":
        read.append(await asyncio.wait_for(anext(messages), ARRIVAL_SECONDS))
    return read


async def _rest(messages: AsyncIterator[SseEvent]) -> list[SseEvent]:
    return [message async for message in messages]
