"""No request can break a thread (issue 15): the gateway's edge, end to end.

Each request here is refused before it reaches a thread, with its status and code, and a
thread started before it (the witness) is unchanged afterwards, to the event of its
history, on a gateway that is still healthy.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from activities.chat import ChatReply, ChatRequest, ProposedCall, ScriptedModel, tool_results
from activities.tooling import tool
from settings import MAX_BODY_BYTES, Settings
from tests.helpers import (
    TEST_SECRET,
    Stack,
    eventually,
    gateway_client,
    history_length,
    new_thread,
    post_run,
    read_sse,
    run_input,
    serve_gateway,
    serve_stack,
    sse_messages,
    types,
)
from workflows.agents import EXAMPLES
from workflows.errors import ErrorCode
from workflows.sdk import AgentDefinition

JSON = {"content-type": "application/json"}


@dataclass
class Witness:
    """A thread with one finished run, and how it looked before the test's request."""

    thread_id: str
    view: dict[str, Any]
    events: int

    async def assert_unchanged(self, stack: Stack) -> None:
        """The thread is as it was, and the gateway answers ``/healthz``."""
        assert stack.client is not None
        assert (await stack.http.get(f"/threads/{self.thread_id}")).json() == self.view
        assert await history_length(stack.client, self.thread_id) == self.events
        assert (await stack.http.get("/healthz")).status_code == 200


@pytest.fixture
async def witness(stack: Stack) -> Witness:
    assert stack.client is not None
    thread_id = new_thread()
    await post_run(stack.http, "demo", run_input(thread_id, "r1", "hello"))
    view = (await stack.http.get(f"/threads/{thread_id}")).json()
    return Witness(thread_id, view, await history_length(stack.client, thread_id))


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response's error object, once its status and code are as expected."""
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"]
    return error


# --- 1. the body's size ---------------------------------------------------------------------


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_body_over_the_cap_is_413_and_changes_nothing(
    stack: Stack, witness: Witness, declared: bool
) -> None:
    body = json.dumps(run_input(witness.thread_id, "r2", "x" * MAX_BODY_BYTES)).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    content: bytes | AsyncIterator[bytes] = body if declared else chunks()
    response = await stack.http.post("/agents/demo", content=content, headers=JSON)

    error_of(response, 413, "BODY_TOO_LARGE")
    await witness.assert_unchanged(stack)


async def test_a_body_just_under_the_cap_is_read(stack: Stack) -> None:
    body = run_input(new_thread(), "r1", "hello")
    body["forwardedProps"] = {"pad": "x" * (MAX_BODY_BYTES - len(json.dumps(body)) - 100)}
    assert len(json.dumps(body)) < MAX_BODY_BYTES

    # clarify declares no forwardedProps, so it takes any. The gateway reads and parses
    # the whole body; the thread then holds it to its own, smaller, input budget.
    events = await post_run(stack.http, "clarify", body)

    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == ErrorCode.INPUT_TOO_LARGE


# --- 2. JSON nesting ------------------------------------------------------------------------


async def test_json_nested_too_deeply_is_400_never_a_500(stack: Stack, witness: Witness) -> None:
    deep_state: Any = 1
    for _ in range(65):
        deep_state = {"a": deep_state}
    bodies = [
        b"[" * 200_000,
        json.dumps(run_input(witness.thread_id, "r2", "hi", state=deep_state)).encode(),
    ]

    for body in bodies:
        response = await stack.http.post("/agents/demo", content=body, headers=JSON)
        error = error_of(response, 400, "MALFORMED_JSON")
        assert "64 levels" in error["message"]
    await witness.assert_unchanged(stack)


# --- 3. the content type --------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"content-type": "text/plain", "origin": "https://elsewhere.example"},
        {"content-type": "application/x-www-form-urlencoded"},
        {},
    ],
    ids=["cross-site-text-plain", "form", "none"],
)
async def test_a_run_not_sent_as_json_is_415_and_runs_nothing(
    stack: Stack, witness: Witness, headers: dict[str, str]
) -> None:
    body = json.dumps(run_input(witness.thread_id, "r2", "hello", "again"))

    response = await stack.http.post("/agents/demo", content=body, headers=headers)

    error_of(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    await witness.assert_unchanged(stack)


# --- 4. hosts and CORS ----------------------------------------------------------------------

ALLOWED_HOST = "agents.example.com"
APP_ORIGIN = "https://app.example.com"


@pytest.fixture
async def fenced(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    """A second gateway on the session's task queue that serves only ``ALLOWED_HOST``
    and lets pages of ``APP_ORIGIN`` call it."""
    settings = Settings(
        task_queue=stack.task_queue,
        auth_hs256_secret=TEST_SECRET,
        allowed_hosts=ALLOWED_HOST,
        cors_origins=APP_ORIGIN,
    )
    async with serve_gateway(settings, stack.client) as url, gateway_client(url) as http:
        yield http


async def test_a_host_not_allowed_is_400_and_changes_nothing(
    stack: Stack, witness: Witness, fenced: httpx.AsyncClient
) -> None:
    run = run_input(witness.thread_id, "r2", "hello", "again")
    for host in ("127.0.0.1", "rebound.attacker.example"):
        response = await fenced.post("/agents/demo", json=run, headers={"host": host})
        error_of(response, 400, "INVALID_HOST")

    named = await fenced.get(f"/threads/{witness.thread_id}", headers={"host": ALLOWED_HOST})
    assert named.json() == witness.view
    # Probes call /healthz by address.
    assert (await fenced.get("/healthz")).status_code == 200
    await witness.assert_unchanged(stack)


async def test_cors_allows_the_listed_origin_only(
    stack: Stack, witness: Witness, fenced: httpx.AsyncClient
) -> None:
    preflight = {
        "host": ALLOWED_HOST,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type,last-event-id",
    }
    allowed = await fenced.options("/agents/demo", headers={**preflight, "origin": APP_ORIGIN})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == APP_ORIGIN
    allowed_headers = allowed.headers["access-control-allow-headers"].lower()
    assert {"authorization", "content-type", "last-event-id"} <= set(allowed_headers.split(", "))

    origin = "https://elsewhere.example"
    refused = await fenced.options("/agents/demo", headers={**preflight, "origin": origin})
    error_of(refused, 400, "CORS_REJECTED")
    assert "access-control-allow-origin" not in refused.headers

    read = await fenced.get(
        f"/threads/{witness.thread_id}", headers={"host": ALLOWED_HOST, "origin": APP_ORIGIN}
    )
    assert read.headers["access-control-allow-origin"] == APP_ORIGIN
    # The session's gateway lists no origins: no CORS headers at all.
    plain = await stack.http.get(f"/threads/{witness.thread_id}", headers={"origin": APP_ORIGIN})
    assert not [name for name in plain.headers if name.startswith("access-control-")]
    await witness.assert_unchanged(stack)


# --- 5. streams per principal ---------------------------------------------------------------

RELEASE: dict[str, asyncio.Event] = {}
"""Per thread, what its ``hold`` tool waits for."""


@tool
async def hold(thread: str) -> str:
    """Wait until the test lets the thread's run go on."""
    await RELEASE.setdefault(thread, asyncio.Event()).wait()
    return "released"


def call_hold(request: ChatRequest) -> ChatReply:
    """Call ``hold`` with the user's message, then say what it returned."""
    results = tool_results(request.messages)
    if results:
        return ChatReply(text=results[0][1])
    thread = str(request.messages[-1].content)
    return ChatReply(tool_calls=[ProposedCall(name="hold", arguments={"thread": thread})])


HOLD = AgentDefinition(
    name="hold",
    description="Holds its run open until the test releases it.",
    model=ScriptedModel("hold", call_hold),
    tools=[hold],
)
CAP = 2


async def test_a_principal_over_its_stream_cap_is_429_until_a_stream_ends(
    client: Client, stack: Stack, witness: Witness
) -> None:
    held = new_thread()
    async with (
        serve_stack(client, agents=[HOLD, *EXAMPLES], max_streams_per_principal=CAP) as capped,
        gateway_client(capped.url, subject="bob") as bob,
        AsyncExitStack() as streams,
    ):
        run = await streams.enter_async_context(
            capped.http.stream("POST", "/agents/hold", json=run_input(held, "r1", held))
        )
        messages = sse_messages(run)
        assert (await anext(messages))[1]["type"] == "RUN_STARTED"
        events_url = f"/threads/{held}/runs/r1/events"
        attached = AsyncExitStack()
        await attached.enter_async_context(capped.http.stream("GET", events_url))

        # Both slots are taken: a third stream of either kind is refused, and the run
        # refused never reaches its thread.
        refused = await capped.http.post(
            "/agents/demo", json=run_input(witness.thread_id, "r2", "hello", "again")
        )
        error_of(refused, 429, "TOO_MANY_REQUESTS")
        assert refused.headers["retry-after"] == "1"
        error_of(await capped.http.get(events_url), 429, "TOO_MANY_REQUESTS")
        await witness.assert_unchanged(stack)
        # The cap is per principal.
        assert types(await post_run(bob, "demo", run_input(new_thread(), "r1", "hi")))[-1] == (
            "RUN_FINISHED"
        )

        # The reader goes away: its slot comes back.
        await attached.aclose()

        async def reattached() -> bool:
            async with capped.http.stream("GET", events_url) as response:
                return response.status_code == 200

        await eventually(reattached, what="the closed stream's slot to be free again")

        # The run ends: its slot comes back too, and both can be used.
        RELEASE.setdefault(held, asyncio.Event()).set()
        rest = [event async for _, event in messages]
        assert rest[-1]["type"] == "RUN_FINISHED"
        await streams.aclose()

        async def both_free() -> bool:
            async with (
                capped.http.stream("GET", events_url) as first,
                capped.http.stream("GET", events_url) as second,
            ):
                return first.status_code == second.status_code == 200

        await eventually(both_free, what="both slots to be free")
        assert (await capped.http.get("/healthz")).status_code == 200


# --- 6. ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize("special", ["_", ".", ":", "@", "-"])
async def test_every_id_accepted_can_be_read_back(stack: Stack, special: str) -> None:
    thread_id = f"t{special}{uuid.uuid4()}"
    run_id = f"r{special}1"
    body = run_input(thread_id, run_id, "hello")
    body["messages"][0]["id"] = f"m{special}1"

    events = await post_run(stack.http, "demo", body)

    assert types(events)[-1] == "RUN_FINISHED"
    thread = await stack.http.get(f"/threads/{thread_id}")
    assert thread.status_code == 200
    assert thread.json()["threadId"] == thread_id
    assert thread.json()["messages"][0]["id"] == f"m{special}1"
    async with stack.http.stream("GET", f"/threads/{thread_id}/runs/{run_id}/events") as response:
        assert [event for _, event in await read_sse(response)] == events


async def test_the_longest_id_can_be_read_back_and_a_longer_one_is_refused(
    stack: Stack, witness: Witness
) -> None:
    longest = "t" + uuid.uuid4().hex + "x" * 95
    assert len(longest) == 128
    await post_run(stack.http, "demo", run_input(longest, "r1", "hello"))
    assert (await stack.http.get(f"/threads/{longest}")).status_code == 200

    response = await stack.http.post("/agents/demo", json=run_input(longest + "x", "r1", "hi"))
    error = error_of(response, 422, "INVALID_RUN_INPUT")
    assert [detail["loc"] for detail in error["details"]] == [["threadId"]]
    bad_message = run_input(witness.thread_id, "r2", "hello", "again")
    bad_message["messages"][1]["id"] = "m/2"
    response = await stack.http.post("/agents/demo", json=bad_message)
    error = error_of(response, 422, "INVALID_RUN_INPUT")
    assert [detail["loc"] for detail in error["details"]] == [["messages", 1, "id"]]
    error_of(await stack.http.get(f"/threads/{longest}x"), 422, "INVALID_PARAMETER")
    await witness.assert_unchanged(stack)


# --- 7. errors without internals ------------------------------------------------------------


async def test_input_temporal_refuses_is_413_not_unavailable(
    stack: Stack, witness: Witness
) -> None:
    """A gateway whose body cap is raised past Temporal's gRPC limit (4 MiB): the run
    Temporal refuses is the client's to fix, not an outage."""
    settings = Settings(
        task_queue=stack.task_queue, auth_hs256_secret=TEST_SECRET, max_body_bytes=8 * 2**20
    )
    big = run_input(witness.thread_id, "r2", "hello", "x" * (5 * 2**20))
    async with serve_gateway(settings, stack.client) as url, gateway_client(url) as http:
        error = error_of(await http.post("/agents/demo", json=big), 413, "INPUT_TOO_LARGE")

    assert error["details"]["errorId"] in error["message"]
    assert "grpc" not in error["message"].lower()
    await witness.assert_unchanged(stack)


async def test_temporal_unreachable_is_503_without_its_address(
    monkeypatch: pytest.MonkeyPatch, stack: Stack
) -> None:
    nowhere = "127.0.0.1:9"
    monkeypatch.setenv("TEMPORAL_ADDRESS", nowhere)
    settings = Settings(task_queue=stack.task_queue, auth_hs256_secret=TEST_SECRET)
    async with serve_gateway(settings, None) as url, gateway_client(url) as http:
        response = await http.get(f"/threads/{new_thread()}")
        health = await http.get("/healthz")

    error = error_of(response, 503, "TEMPORAL_UNAVAILABLE")
    assert response.headers["retry-after"] == "1"
    assert nowhere not in response.text
    assert health.status_code == 503
    assert nowhere not in health.text
    assert error["details"]["errorId"] in error["message"]
    assert "error id" in health.json()["temporal"]


async def test_unknown_routes_and_methods_answer_in_the_error_format(stack: Stack) -> None:
    error_of(await stack.http.get("/nowhere"), 404, "UNKNOWN_ROUTE")
    error_of(await stack.http.put("/agents/demo", json={}), 405, "METHOD_NOT_ALLOWED")
