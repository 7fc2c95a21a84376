"""The OpenAI-compatible model, against a local server speaking the real wire format:
its text and tool calls reach the SSE client while the model is still generating."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.chat import SIGNAL_INTERVAL_SECONDS
from tests.chat_server import ChatServer, Reply, ScriptedCall
from tests.helpers import (
    Stack,
    assert_valid_stream,
    eventually,
    new_thread,
    post_run,
    run_input,
    sse_messages,
    types,
)
from workflows.models import STREAM_SIGNAL
from workflows.thread_ids import workflow_id_for


async def stream_until(
    stack: Stack, body: dict[str, Any], server: ChatServer, seen: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stream a run; once ``seen(events so far)`` holds, check the model is still held
    midway, note the events, and release it. Returns (events then, all events)."""
    events: list[dict[str, Any]] = []
    then: list[dict[str, Any]] = []
    async with stack.http.stream("POST", "/agents/llm", json=body) as response:
        async for _, event in sse_messages(response):
            events.append(event)
            if not then and seen(events):

                async def holding() -> bool:
                    return server.holding

                await eventually(holding, what="the model to be held midway")
                then = list(events)
                server.release()
    return then, events


def text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def test_text_reaches_the_client_while_the_model_is_generating(
    llm: tuple[ChatServer, Stack],
) -> None:
    server, stack = llm
    server.script(Reply(text=["Hel", "lo ", "wor", "ld."], hold_after=2))
    thread_id = new_thread()

    then, events = await stream_until(
        stack, run_input(thread_id, "r1", "hi"), server, lambda seen: text(seen) == "Hello "
    )

    assert "RUN_FINISHED" not in types(then)
    assert text(events) == "Hello world."
    assert events[-1]["outcome"] == {"type": "success"}
    assert_valid_stream(events, thread_id)
    [request] = server.requests
    assert request["stream"] is True and request["model"] == "local-model"
    assert request["messages"] == [{"role": "user", "content": "hi"}]
    assert request["tools"][0]["function"]["name"] == "weather"
    view = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert view["messages"][-1]["content"] == "Hello world."


async def stream_signals(client: Client, thread_id: str) -> list[datetime]:
    """When the thread's workflow runs, each continued from the one before, received
    each ``model_stream`` signal, in order."""
    times: list[datetime] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(
            workflow_id_for(thread_id), run_id=run_id
        ).fetch_history()
        times[:0] = [
            event.event_time.ToDatetime()
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and event.workflow_execution_signaled_event_attributes.signal_name == STREAM_SIGNAL
        ]
        start = history.events[0].workflow_execution_started_event_attributes
        if not start.continued_execution_run_id:
            return times
        run_id = start.continued_execution_run_id


async def test_a_fast_models_pieces_travel_together_one_signal_per_interval(
    llm: tuple[ChatServer, Stack],
) -> None:
    """Each ``model_stream`` signal is a workflow task of the thread: a model writing a
    token every 10 ms costs about one per ``SIGNAL_INTERVAL_SECONDS``, not one per token,
    and the client still gets every token."""
    server, stack = llm
    words = [f"w{i} " for i in range(20)]
    server.script(Reply(text=words, interval_seconds=0.01))
    thread_id = new_thread()

    events = await post_run(stack.http, "llm", run_input(thread_id, "r1", "hi"))

    assert text(events) == "".join(words)
    assert stack.client is not None
    signalled = await stream_signals(stack.client, thread_id)
    assert len(signalled) >= 2
    spread = (signalled[-1] - signalled[0]).total_seconds()
    # Each signal but the first and the last was sent an interval or more after the one
    # before; as the server times them, the spread may look shorter by the first's round
    # trip, allowed here up to two intervals (a busy machine).
    assert len(signalled) <= 4 + spread / SIGNAL_INTERVAL_SECONDS


async def test_tool_calls_stream_as_args_and_the_results_go_back_to_the_model(
    llm: tuple[ChatServer, Stack],
) -> None:
    server, stack = llm
    server.script(
        Reply(tool_calls=[ScriptedCall("weather", {"city": "Oslo"}, pieces=3)], hold_after=2),
        Reply(text=["Sunny ", "in ", "Bergen."]),
    )
    thread_id = new_thread()

    then, events = await stream_until(
        stack,
        run_input(thread_id, "r1", "weather in Oslo?"),
        server,
        lambda seen: any(e["type"] == "TOOL_CALL_ARGS" for e in seen),
    )

    assert types(then)[-2:] == ["TOOL_CALL_START", "TOOL_CALL_ARGS"]
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"city": "Oslo"}
    assert_valid_stream(events, thread_id)
    [approval] = events[-1]["outcome"]["interrupts"]
    call_id = then[-1]["toolCallId"]
    assert approval["toolCallId"] == call_id

    edited = {
        "interruptId": approval["id"],
        "status": "resolved",
        "payload": {"approved": True, "editedArgs": {"city": "Bergen"}},
    }
    resumed = await post_run(
        stack.http,
        "llm",
        {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [edited]},
    )

    assert_valid_stream(resumed)
    # The model is told a person changed its call, and to what.
    [result] = [e["content"] for e in resumed if e["type"] == "TOOL_CALL_RESULT"]
    shown = json.loads(result)
    assert (shown["editedArgs"], shown["result"]) == ({"city": "Bergen"}, "Bergen: sunny")
    assert text(resumed) == "Sunny in Bergen."
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[1]["tool_calls"] == [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": "weather", "arguments": json.dumps({"city": "Oslo"})},
        }
    ]
    assert second[2] == {"role": "tool", "tool_call_id": call_id, "content": result}


async def test_a_reply_broken_off_midway_is_retried_and_completed_once(
    llm: tuple[ChatServer, Stack],
) -> None:
    server, stack = llm
    server.script(
        Reply(text=["Par", "tial ", "unsent"], hold_after=2, error_after=2),
        Reply(text=["Whole ", "reply."]),
    )
    thread_id = new_thread()

    then, events = await stream_until(
        stack, run_input(thread_id, "r1", "hi"), server, lambda seen: text(seen) == "Partial "
    )

    # The failed attempt's message is closed where it broke off; the retry streams anew.
    starts = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert len(starts) == 2 and starts[0] != starts[1]
    assert text(events) == "Partial Whole reply."
    assert events[-1]["outcome"] == {"type": "success"}
    assert_valid_stream(events, thread_id)
    view = (await stack.http.get(f"/threads/{thread_id}")).json()
    assert [m["content"] for m in view["messages"] if m["role"] == "assistant"] == ["Whole reply."]


async def test_a_model_server_that_keeps_failing_is_a_run_error(
    llm: tuple[ChatServer, Stack],
) -> None:
    server, stack = llm
    server.script(*[Reply(status=503)] * 3)
    thread_id = new_thread()

    failed = await post_run(stack.http, "llm", run_input(thread_id, "r1", "hi"))

    assert failed[-1]["type"] == "RUN_ERROR"
    assert failed[-1]["code"] == "AGENT_FAILED"
    assert len(server.requests) == 3
    again = await post_run(stack.http, "llm", run_input(thread_id, "r2", "hi", "again"))
    assert again[-1]["outcome"] == {"type": "success"}


async def test_a_run_that_fails_midway_ends_with_the_threads_conversation(
    llm: tuple[ChatServer, Stack],
) -> None:
    server, stack = llm
    server.script(*[Reply(text=["Par", "tial"], error_after=1)] * 3)
    thread_id = new_thread()

    failed = await post_run(stack.http, "llm", run_input(thread_id, "r1", "hi"))

    assert types(failed)[-2:] == ["MESSAGES_SNAPSHOT", "RUN_ERROR"]
    assert failed[-1]["code"] == "AGENT_FAILED"
    streamed = {e["messageId"] for e in failed if e["type"] == "TEXT_MESSAGE_START"}
    conversation = failed[-2]["messages"]
    assert streamed and not streamed & {m["id"] for m in conversation}
    # A client that holds the conversation the run ended with resends it: what the
    # failed turn streamed is not in it (a new assistant message would be refused).
    body = run_input(thread_id, "r2", "again")
    body["messages"] = [*conversation, {**body["messages"][0], "id": "m2"}]
    again = await post_run(stack.http, "llm", body)
    assert again[-1]["outcome"] == {"type": "success"}
