"""A run's stream stays open through what leaves it without events for a while: a model
thinking or a tool running (keepalives, so that proxies on the way do not close it as
idle), its worker killed mid-reply (a read that no worker answers is waited out, as a
follower's is, until the worker that takes the thread over has the run go on), and the
Temporal server killed mid-run (the run's result is asked for again until the server is
back)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.openai_chat import OpenAIModel
from bench.reads import counted
from gateway import streaming
from gateway.streaming import READ_TIMEOUT
from settings import Settings
from tests.chat_server import ChatServer, Reply
from tests.crash_worker import AGENTS, CHAT
from tests.helpers import (
    ARRIVAL_SECONDS,
    TEST_SECRET,
    SseEvent,
    Stream,
    assert_valid_stream,
    eventually,
    gateway_client,
    new_thread,
    post_run,
    run_input,
    serve_gateway,
    serve_stack,
    thread_log,
)
from tests.processes import DevServer, engine
from tests.receiver import Receiver
from tests.test_stream_reads import Reads
from worker import ensure_search_attributes
from workflows.sdk import AgentDefinition
from workflows.thread_ids import workflow_id_for


def _text(piece: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["type"] == "TEXT_MESSAGE_CONTENT" and event["delta"] == piece


def _any_text(event: dict[str, Any]) -> bool:
    return event["type"] == "TEXT_MESSAGE_CONTENT"


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
            url = f"/threads/{thread_id}/runs/r1/events"
            async with stack.http.stream("POST", "/agents/llm", json=body) as response:
                # Each keepalive notes how many messages had come before it.
                run = Stream(response, lambda: len(run.messages))
                try:
                    await run.until(lambda: run.saw(_text("Hel")) is not None, "the first text")
                    held = run.saw(_text("Hel"))
                    await run.until(
                        lambda: any(count >= held for count in run.keepalives),
                        "a keepalive while the model is held",
                    )
                    assert server.holding

                    # A client reconnecting meanwhile gets the run so far, then keepalives.
                    async with stack.http.stream("GET", url) as reconnected_response:
                        reconnected = Stream(
                            reconnected_response, lambda: len(reconnected.messages)
                        )
                        try:
                            await reconnected.until(
                                lambda: any(count >= held for count in reconnected.keepalives),
                                "a reconnected client's keepalive while the model is held",
                            )
                        finally:
                            reconnected.close()
                    assert reconnected.messages == run.messages[:held]

                    server.release()
                    messages = await run.end(ARRIVAL_SECONDS)
                finally:
                    run.close()

    events = [event for _, event in messages]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert "".join(e["delta"] for e in events if _any_text(e)) == "Hello."
    assert_valid_stream(events, thread_id)


KILLED_KEEPALIVE_SECONDS = 2.0
"""The keepalive interval of the test below: longer than a read interval (so that the
streams' reads just after the kill go out before any keepalive), far shorter than
``READ_TIMEOUT`` (so that keepalives come while those reads wait for a worker)."""


async def test_a_runs_streams_wait_out_its_worker_killed_mid_reply(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker is killed while the model's reply streams, so the next read of the
    run's stream, and of a reconnected client's (each through a gateway of its own),
    finds no worker; each fails after ``READ_TIMEOUT`` (Temporal alone would hold it
    30 s and then fail the stream), or at once as one read too many of a thread whose
    worker is gone. Keepalives go out while a read waits. The streams read again once a
    new worker has taken the thread over and retried the model call, as soon as its
    heartbeats stopped for the model's ``heartbeat`` (not its two-minute timeout), and
    end with the run's ``RUN_FINISHED``."""
    monkeypatch.setattr(streaming, "KEEPALIVE_SECONDS", KILLED_KEEPALIVE_SECONDS)
    queries = [Reads(), Reads()]
    killed = False

    def noting(mine: Reads) -> Callable[[], bool]:
        """A keepalive's note: whether it came after the kill, while its stream's read
        waited."""
        return lambda: killed and mine.waiting > 0

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
                serve_gateway(settings, counted(client, queries[0]), AGENTS) as url,
                serve_gateway(settings, counted(client, queries[1]), AGENTS) as other_url,
                gateway_client(url) as http,
                gateway_client(other_url) as other_http,
            ):
                thread_id = new_thread()
                body = run_input(thread_id, "r1", "hi")
                async with (
                    http.stream("POST", "/agents/chat", json=body) as response,
                    other_http.stream("GET", f"/threads/{thread_id}/runs/r1/events") as again,
                ):
                    streams = [
                        Stream(response, noting(queries[0])),
                        Stream(again, noting(queries[1])),
                    ]
                    try:
                        for stream in streams:
                            await stream.until(partial(_saw_text, stream), "the first text")
                        await worker.kill()
                        killed = True

                        async def reads_failed() -> bool:
                            return all(mine.failed > 0 for mine in queries)

                        await eventually(
                            reads_failed,
                            timeout=READ_TIMEOUT.total_seconds() + ARRIVAL_SECONDS,
                            what="the streams' reads with no worker to fail",
                        )
                        stack.start_worker(command)
                        assert CHAT.model is not None and CHAT.model.heartbeat is not None
                        wait = READ_TIMEOUT.total_seconds() + CHAT.model.heartbeat.total_seconds()
                        streamed = [await stream.end(wait + ARRIVAL_SECONDS) for stream in streams]
                    finally:
                        for stream in streams:
                            stream.close()
                log = await thread_log(http, thread_id)
                assert streamed == [log, log]

    # The stream whose read Temporal held (not the one it refused at once as one too
    # many) kept its keepalives going while the read waited for a worker.
    assert any(True in stream.keepalives for stream in streams), streams[0].keepalives
    events = [event for _, event in log]
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert events[-1]["outcome"] == {"type": "success"}
    assert_valid_stream(events, thread_id)
    # The killed worker's attempt is left behind, closed; the retry's reply is the answer.
    assert len(server.requests) == 2


def _saw_text(stream: Stream) -> bool:
    return stream.saw(_any_text) is not None


SERVER_KEEPALIVE_SECONDS = 0.5
"""The keepalive interval of the test below: short, so that keepalives come while the
server is down."""
SERVER_DOWN_SECONDS = 60.0
"""How long the test below gives the gateway to give up on the SDK's retries of a read
(about 10 s, and a follower's read interval), and the restarted server to serve."""


async def test_streams_wait_out_the_temporal_server_killed_mid_run(
    tmp_path: Path,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The Temporal server is killed while an approved email is being sent, and stays
    down until the SDK has given up retrying the run's result (the gateway logs that
    the run waits for Temporal; before, the stream ended there with a ``RUN_ERROR``
    while the run went on). The run's stream, and a follower's of the thread through
    another gateway, keep sending keepalives; once the server is back on its file and
    the email has gone out, the run's stream ends with the run's ``RUN_FINISHED``, and
    both hold the events of the thread's log, timestamps and all. The follower then
    watches the thread's history again: its failed long poll did not turn it to
    polling for good."""
    monkeypatch.setattr(streaming, "KEEPALIVE_SECONDS", SERVER_KEEPALIVE_SECONDS)
    caplog.set_level(logging.WARNING, logger=streaming.__name__)
    server = DevServer(tmp_path / "temporal.sqlite")
    client = await server.start()
    following = Reads()
    try:
        await ensure_search_attributes(client)
        # The email is held past the webhook's default 10 s, which would have it retried.
        async with engine(
            server.address, AGUI_DEMO_MAIL_URL=receiver.url, AGUI_WEBHOOK_TIMEOUT_SECONDS="120"
        ) as stack:
            stack.start_worker()
            settings = Settings(task_queue=stack.task_queue, auth_hs256_secret=TEST_SECRET)
            async with (
                serve_gateway(settings, client) as url,
                serve_gateway(settings, counted(client, following)) as follower_url,
                gateway_client(url) as http,
                gateway_client(follower_url) as follower_http,
            ):
                thread_id = new_thread()
                asked = await post_run(http, "demo", run_input(thread_id, "r1", "mail a@b.com"))
                (interrupt,) = asked[-1]["outcome"]["interrupts"]
                entry = {"interruptId": interrupt["id"], "status": "resolved"}
                body = {
                    "threadId": thread_id,
                    "runId": "r2",
                    "messages": [],
                    "resume": [entry | {"payload": {"approved": True}}],
                }
                receiver.hold()
                async with contextlib.AsyncExitStack() as streams:
                    response = await streams.enter_async_context(
                        http.stream("POST", "/agents/demo", json=body)
                    )
                    run = Stream(response)
                    streams.callback(run.close)
                    await receiver.wait_for(1)
                    # The run waits on its tool now and logs nothing until it returns: a
                    # follower reads what the thread has, then long-polls its history (its
                    # first fetch, from the history's start, returns at once).
                    followed = await streams.enter_async_context(
                        follower_http.stream("GET", f"/threads/{thread_id}/events")
                    )
                    follower = Stream(followed)
                    streams.callback(follower.close)
                    fetches = following.fetches
                    workflow_id = workflow_id_for(thread_id)
                    await follower.until(
                        lambda: fetches[workflow_id] >= 2, "the follower to watch the history"
                    )
                    # That long poll fails while the server is down.
                    watched = fetches[workflow_id]
                    messages = await _outage(server, run, follower, caplog, receiver)
                    await follower.until(
                        lambda: follower.saw(_run_finished("r2")) is not None,
                        "the follower to read the run's end",
                    )
                    await follower.until(
                        lambda: fetches[workflow_id] > watched,
                        "the follower to watch the history again",
                    )
                log = await thread_log(http, thread_id)
    finally:
        await server.stop()

    events = [event for _, event in messages]
    assert events[0]["type"] == "RUN_STARTED" and events[0]["runId"] == "r2"
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert events[-1]["outcome"] == {"type": "success"}
    assert log[len(log) - len(messages) :] == messages
    assert follower.messages == log
    assert_valid_stream([event for _, event in log], thread_id)
    assert len(receiver.keys()) == 1


async def _outage(
    server: DevServer,
    run: Stream,
    follower: Stream,
    caplog: pytest.LogCaptureFixture,
    receiver: Receiver,
) -> list[SseEvent]:
    """Kill ``server`` until ``run`` waits for it past the SDK's retries, with both
    streams sending keepalives meanwhile; start it again, let the held email go, and
    return the run's stream once it has ended."""
    await server.kill()
    await run.until(
        lambda: any("waits for Temporal" in r.message for r in caplog.records),
        "the run to wait for Temporal",
        SERVER_DOWN_SECONDS,
    )
    for stream in (run, follower):
        await stream.until(
            partial(_kept_alive_after, stream, len(stream.keepalives)), "a keepalive"
        )
    await server.start()
    receiver.release()
    return await run.end(SERVER_DOWN_SECONDS)


def _kept_alive_after(stream: Stream, keepalives: int) -> bool:
    return len(stream.keepalives) > keepalives


def _run_finished(run_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["type"] == "RUN_FINISHED" and event["runId"] == run_id
