"""Fuzzing the gateway over real HTTP (issue 15), against a real worker and Temporal.

Two property-based tools, each where it fits:

- schemathesis walks the route surface from the gateway's own OpenAPI description
  (``GET /openapi.json``), with cases that fit it and cases that break it;
- hypothesis strategies write hostile ``RunAgentInput`` bodies (wrong types, huge and odd
  ids, deep nesting, unicode, resume entries for the open interrupt and made-up ones, odd
  states, roles and ``forwardedProps``) and raw requests (bytes, content types, tokens,
  paths), aimed at a thread that waits on an interrupt.

Every request is held to the same properties: no 5xx, no dropped connection, no answer
left unfinished; an error before a stream is the gateway's one JSON body
``{"error": {"code", "message"}}``, and a run's stream is AG-UI that ends with
``RUN_FINISHED`` or a ``RUN_ERROR`` with a ``code``; a rejected request leaves the
waiting thread exactly as it was (its view and its Temporal history); and after every
test the thread can still be resumed and the gateway is healthy.

The worker and the gateway run as processes of their own, as deployed, on a Temporal dev
server of their own, all new for each test: a request that wedges them harms no other
test. The tools drive blocking loops, so they run in a worker thread while the test's
event loop does the async checks. Bounded to
about a minute in all: fixed example counts, derandomized (the same examples every run,
so CI is reproducible), no example database.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import httpx
import jwt
import pytest
import requests
import schemathesis
from ag_ui.core import RunAgentInput
from hypothesis import example, given, settings
from hypothesis import strategies as st
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.transport import Response as CaseResponse
from schemathesis.generation.case import Case
from schemathesis.generation.modes import GenerationMode
from temporalio.service import RPCError

from gateway.errors import GatewayErrorCode
from tests.helpers import (
    OWNER,
    TEST_SECRET,
    Stack,
    assert_valid_stream,
    bearer,
    forget_streams,
    history_length,
    new_thread,
    post_run,
    run_input,
    start_dev_server,
)
from tests.processes import engine
from workflows.errors import ErrorCode

T = TypeVar("T")

REQUEST_SECONDS = 15.0
"""How long one request may take, its answer read to the end: a demo run takes well under
a second, so an answer still open after this is one the gateway left hanging."""
RUN_ROUTE = "/agents/{agent_id}"
FOLLOW_ROUTE = "/threads/{thread_id}/events"
ERROR_KEYS = {"code", "message", "details"}
STABLE_CODES = {code.value for code in ErrorCode} | {code.value for code in GatewayErrorCode}
"""The codes clients may switch on: the workflow's and the gateway's, as published."""
ADMIN_GROUP = "agui-admins"


def fuzzing(examples: int) -> settings:
    """Reproducible and bounded: ``examples`` examples, the same every run, none written
    to disk, and no per-example deadline (a real server's latency varies)."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None)


class Wedged(BaseException):
    """The stack stopped answering (a request left hanging, a thread that cannot be read).

    Later examples could not be trusted, and hypothesis, shrinking this one, would blame
    them: a ``BaseException`` is what hypothesis lets through at once, unshrunk.
    """


@pytest.fixture
async def fuzzed() -> AsyncIterator[Stack]:
    """``python worker.py`` and ``python -m gateway`` on a Temporal dev server, all new
    for each test: a thread one test wedged, or an odd thread id it used, meets no other."""
    temporal = await start_dev_server()
    forget_streams()
    try:
        async with engine(temporal.client.service_client.config.target_host) as running:
            running.start_worker()
            gateway = await running.start_gateway()
            url = str(gateway.http.base_url).rstrip("/")
            yield Stack(temporal.client, running.task_queue, gateway.http, url)
    finally:
        await temporal.shutdown()


@dataclass
class WaitingThread:
    """A thread of :data:`OWNER` that waits on the demo agent's approval, and how it
    looked when last seen."""

    stack: Stack
    thread_id: str = ""
    interrupt_id: str = ""
    view: dict[str, Any] = field(default_factory=dict)
    history: int = 0

    async def start(self) -> None:
        """Start a new such thread (a fuzzed resume may have answered the last one)."""
        self.thread_id = new_thread()
        body = run_input(self.thread_id, "r1", "email bob@example.com")
        async with asyncio.timeout(REQUEST_SECONDS):
            events = await post_run(self.stack.http, "demo", body)
        outcome = events[-1]["outcome"]
        assert outcome["type"] == "interrupt", events[-1]
        self.interrupt_id = outcome["interrupts"][0]["id"]
        await self.look()

    async def look(self) -> None:
        """Remember the thread as it is now."""
        self.view = await self._view()
        self.history = await self._history()

    @property
    def path(self) -> str:
        """The thread's own route (``GET`` reads it, ``DELETE`` deletes it)."""
        return f"/threads/{self.thread_id}"

    async def assert_erased(self, after: object) -> None:
        """The thread is gone, as ``after`` (its deletion) should leave it."""
        response = await self.stack.http.get(self.path)
        assert response.status_code == 404, f"the thread is still there after {after}"
        assert response.json()["error"]["code"] == GatewayErrorCode.UNKNOWN_THREAD

    async def assert_unchanged(self, after: object) -> None:
        """The thread is as last seen: ``after`` changed nothing."""
        assert await self._view() == self.view, f"the waiting thread changed after {after}"
        history = await self._history()
        assert history == self.history, (
            f"the waiting thread's history grew from {self.history} to {history} after {after}"
        )

    async def recover(self, after: object) -> None:
        """After a failed check: replace the thread if ``after`` changed it, so the next
        examples (hypothesis shrinking this one) start from a waiting thread again.

        Raises:
            Wedged: The thread cannot be read any more, or no new one can be started.
        """
        try:
            async with asyncio.timeout(REQUEST_SECONDS):
                gone = (await self.stack.http.get(self.path)).status_code == 404
                if gone or await self._view() != self.view or await self._history() != self.history:
                    await self.start()
        except (AssertionError, TimeoutError, httpx.HTTPError, RPCError) as err:
            raise Wedged(f"the stack did not recover ({err!r}) after {after}") from err

    async def is_waiting(self) -> bool:
        status: str = (await self._view())["status"]
        return status == "waiting"

    async def assert_resumable(self) -> None:
        """Approving the interrupt sends the email and the run succeeds; the gateway is
        healthy."""
        entry = {"interruptId": self.interrupt_id, "status": "resolved"}
        body = {
            "threadId": self.thread_id,
            "runId": "approve",
            "messages": [],
            "resume": [{**entry, "payload": {"approved": True}}],
        }
        async with asyncio.timeout(REQUEST_SECONDS):
            events = await post_run(self.stack.http, "demo", body)
            health = await self.stack.http.get("/healthz")
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        assert events[-1]["outcome"] == {"type": "success"}, events[-1]
        assert "TOOL_CALL_RESULT" in [event["type"] for event in events]
        assert health.status_code == 200, health.text
        assert health.json()["status"] == "ok"

    async def _view(self) -> dict[str, Any]:
        response = await self.stack.http.get(self.path)
        assert response.status_code == 200, response.text
        view: dict[str, Any] = response.json()
        return view

    async def _history(self) -> int:
        assert self.stack.client is not None
        return await history_length(self.stack.client, self.thread_id)


@pytest.fixture
async def waiting(fuzzed: Stack) -> WaitingThread:
    thread = WaitingThread(fuzzed)
    await thread.start()
    return thread


def judge(
    status: int,
    content_type: str,
    body: bytes,
    run: bool,
    thread_id: Any = None,
    draft: bool = False,
) -> bool:
    """Check one answer against the gateway's contracts; whether it rejected the request.

    Args:
        status: The answer's HTTP status.
        content_type: Its ``content-type``.
        body: Its whole body.
        run: Whether it answers a run (``POST /agents/{agent_id}``), which streams.
        thread_id: The run's ``threadId`` as sent, to check its stream as the thread's.
        draft: Whether the run asked for the interrupt draft's output (``?compat=draft``),
            which is not AG-UI 1.0.

    Returns:
        Whether the request was rejected: a redirect, an HTTP error, or a run's stream
        that its thread never recorded (``RUN_STARTED`` and ``RUN_ERROR`` without SSE
        ids).

    Raises:
        AssertionError: A 5xx, an error body of another shape, or a run's answer that is
            not an AG-UI stream ending with ``RUN_FINISHED`` or a ``RUN_ERROR``; an error
            whose code is not one of :data:`STABLE_CODES`.
    """
    assert status < 500, f"server error {status}: {body[:2000]!r}"
    if 300 <= status < 400:
        return True
    if status >= 400:
        assert content_type.startswith("application/json"), (status, content_type, body[:500])
        error = _parsed(body)
        assert isinstance(error, dict) and set(error) == {"error"}, (status, error)
        detail = error["error"]
        assert isinstance(detail, dict) and set(detail) <= ERROR_KEYS, (status, error)
        assert detail.get("code") in STABLE_CODES, (status, error)
        assert isinstance(detail.get("message"), str) and detail["message"], (status, error)
        return True
    if not run:
        return False
    assert content_type.startswith("text/event-stream"), (status, content_type, body[:500])
    ids: list[str | None] = []
    events: list[dict[str, Any]] = []
    event_id: str | None = None
    # SSE ends lines at CR and LF only (str.splitlines would split inside a JSON string).
    for line in re.split(r"\r\n|\r|\n", body.decode()):
        if line.startswith("id: "):
            event_id = line.removeprefix("id: ")
        elif line.startswith("data: "):
            events.append(_parsed(line.removeprefix("data: ").encode()))
            ids.append(event_id)
        elif not line:
            event_id = None
    kinds = [event.get("type") for event in events]
    assert kinds and kinds[0] == "RUN_STARTED", kinds
    assert kinds[-1] in ("RUN_FINISHED", "RUN_ERROR"), f"the stream did not end: {kinds}"
    assert not {"RUN_FINISHED", "RUN_ERROR"} & set(kinds[:-1]), kinds
    if kinds[-1] == "RUN_ERROR":
        assert events[-1].get("code") in STABLE_CODES, events[-1]
    if not draft:
        assert_valid_stream(events, thread_id if isinstance(thread_id, str) else None)
    return kinds[-1] == "RUN_ERROR" and all(seq is None for seq in ids)


def _parsed(text: bytes) -> Any:
    try:
        return json.loads(text)
    except ValueError as err:
        raise AssertionError(f"not JSON ({err}): {text[:500]!r}") from err


# The route surface, from the OpenAPI description


def declare_run_body(spec: dict[str, Any]) -> None:
    """Give ``POST /agents/{agent_id}`` its ``RunAgentInput`` body in ``spec``, unless
    the description has one.

    The gateway reads that body itself (to answer its own 400 and 422), so FastAPI need
    not describe it; undescribed, schemathesis would never send one.
    """
    operation = spec["paths"][RUN_ROUTE]["post"]
    if "requestBody" in operation:
        return
    schema = RunAgentInput.model_json_schema(
        by_alias=True, ref_template="#/components/schemas/{model}"
    )
    components = spec.setdefault("components", {}).setdefault("schemas", {})
    components.update(schema.pop("$defs", {}))
    components["RunAgentInput"] = schema
    body = {"schema": {"$ref": "#/components/schemas/RunAgentInput"}}
    operation["requestBody"] = {"required": True, "content": {"application/json": body}}


def keeps_the_contracts(_: CheckContext, response: CaseResponse, case: Case[Any]) -> bool | None:
    """A schemathesis check: :func:`judge` on the case's answer."""
    assert not response.stream_cut_short, "the event stream did not end in time"
    content_type = (response.headers.get("content-type") or [""])[0]
    thread_id = case.body.get("threadId") if isinstance(case.body, dict) else None
    run = case.path == RUN_ROUTE
    draft = isinstance(case.query, dict) and case.query.get("compat") == "draft"
    judge(response.status_code, content_type, response.content, run, thread_id, draft)
    return None


Pinned = tuple[str, str, dict[str, str]]
"""An operation (path, method) and path parameters to fix for it."""


def walk_routes(spec: dict[str, Any], url: str, examples: int, pinned: list[Pinned]) -> None:
    """Send ``examples`` schemathesis cases to ``url``, each checked with
    :func:`keeps_the_contracts`: cases for every route of ``spec``, and as many again for
    the ``pinned`` operations with their path parameters fixed (made-up agent names and
    thread ids mostly stop at a 404; these reach the agents' runs and a real thread).

    Blocking (schemathesis sends with ``requests``): run it off the event loop.
    """
    config = SchemathesisConfig.from_dict(
        {"request-timeout": REQUEST_SECONDS, "max-stream-events": 100_000}
    )
    schema = schemathesis.openapi.from_dict(spec, config=config)
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    cases = st.one_of(
        *(schema.as_strategy(mode) for mode in modes),
        *(
            schema[path][method].as_strategy(mode, path_parameters=parameters)
            for path, method, parameters in pinned
            for mode in modes
        ),
    )
    session = requests.Session()

    @fuzzing(examples)
    @given(case=cases)
    def send(case: Case[Any]) -> None:
        try:
            response = case.call(base_url=url, session=session, headers=bearer())
        except requests.RequestException as err:
            request = case.as_curl_command(headers=bearer())
            raise Wedged(f"no complete answer ({err!r}) to {request}") from err
        case.validate_response(response, checks=[not_a_server_error, keeps_the_contracts])

    with session:
        send()


async def test_every_route_keeps_its_contracts_under_schemathesis(
    fuzzed: Stack, waiting: WaitingThread
) -> None:
    response = await fuzzed.http.get("/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    declare_run_body(spec)
    # A follower's stream stays open while its thread lives, by design: a case that
    # named a thread the cases had made would hang until the request timeout
    # (tests/test_follow.py covers the route; tests/unit/test_gateway.py its parameters).
    del spec["paths"][FOLLOW_ROUTE]
    agents = (await fuzzed.http.get("/agents")).json()["agents"]
    thread = {"thread_id": waiting.thread_id}
    pinned: list[Pinned] = [
        *((RUN_ROUTE, "POST", {"agent_id": agent["name"]}) for agent in agents),
        ("/threads/{thread_id}", "GET", thread),
        ("/threads/{thread_id}/runs/{run_id}/events", "GET", {**thread, "run_id": "r1"}),
    ]

    await asyncio.to_thread(walk_routes, spec, fuzzed.url, 300, pinned)

    await waiting.assert_unchanged("the schemathesis cases")
    await waiting.assert_resumable()


# Hostile requests aimed at a waiting thread

WAITING = "⟪waiting thread⟫"
"""Stands for the waiting thread's id in generated bodies; filled in when sent, so an
example means the same after the thread is replaced."""
NEW_THREAD = "⟪new thread⟫"
"""Stands for a thread id used nowhere else."""
OPEN_INTERRUPT = "⟪open interrupt⟫"
"""Stands for the id of the waiting thread's open interrupt."""
DEEP = "⟪deep⟫"
"""A string starting so stands for JSON nested as many levels deep as the number after
it, spliced into the body's text (the encoder will not nest that deep)."""


def _repeat(text: str, times: int) -> str:
    return text * times


def _deep(depth: int) -> str:
    return f"{DEEP}{depth}"


odd_text = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(codec="ascii"), max_size=10),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
    st.sampled_from(["", " ", "\x00", "\u202e", "../..", "%2F", "agui-thread-x", "a\nb", "😀"]),
    st.builds(_repeat, st.sampled_from(["x", "é", "😀", "\x00"]), st.integers(1, 5_000)),
)
"""Text a client may send: any unicode, lone surrogates, control characters, long."""
huge_text = st.builds(_repeat, st.just("x"), st.integers(0, 3_000_000))
"""Up to 3 MB: more than Temporal takes in one payload."""
numbers = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    st.sampled_from([0, -1, 1e308, -1e308, 2**63, 2**64]),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, odd_text),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_text, inner, max_size=3),
    max_leaves=8,
)
any_json = st.one_of(json_values, st.integers(1, 100_000).map(_deep))
"""Any JSON value, or JSON nested up to 100,000 levels deep."""


DEMO_ASKS = [
    "email bob@example.com",
    "mail a@b.com and c@d.com",
    "quarterly",
    "confirm",
    "policy",
    "quarterly confirm policy and mail x@y.org",
    "transfer 50 to Robin",
    "clean /tmp/a.log /var/b",
    "book a table",
]
"""What makes the example agents do something: ask, call tools."""
texts = st.one_of(odd_text, st.sampled_from(DEMO_ASKS), huge_text)


def usually(value: str, otherwise: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``value`` two times in three, else a draw of ``otherwise``. (``st.one_of`` would
    pick a constant far less often.)"""
    return st.tuples(st.sampled_from([True, True, False]), otherwise).map(
        lambda pick: value if pick[0] else pick[1]
    )


thread_ids = usually(WAITING, usually(NEW_THREAD, odd_text))
interrupt_ids = usually(OPEN_INTERRUPT, odd_text)
content_parts = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
        st.fixed_dictionaries(
            {"type": st.just("binary"), "mimeType": odd_text},
            optional={"data": odd_text, "url": odd_text, "id": odd_text},
        ),
    ),
    max_size=3,
)
tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": odd_text,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": odd_text, "arguments": odd_text}),
        }
    ),
    max_size=2,
)
messages = st.one_of(
    st.fixed_dictionaries(
        {"id": odd_text, "role": st.just("user"), "content": st.one_of(texts, content_parts)},
        optional={"name": odd_text},
    ),
    st.fixed_dictionaries(
        {"id": odd_text, "role": st.just("assistant")},
        optional={"content": texts, "toolCalls": tool_calls},
    ),
    st.fixed_dictionaries(
        {"id": odd_text, "role": st.sampled_from(["system", "developer"]), "content": texts}
    ),
    st.fixed_dictionaries(
        {"id": odd_text, "role": st.just("tool"), "content": texts, "toolCallId": odd_text}
    ),
)
tools = st.lists(
    st.fixed_dictionaries({"name": odd_text, "description": odd_text, "parameters": json_values}),
    max_size=2,
)
contexts = st.lists(st.fixed_dictionaries({"description": odd_text, "value": odd_text}), max_size=2)
forwarded = st.fixed_dictionaries(
    {},
    optional={
        "expiresInSeconds": st.one_of(numbers, json_values),
        "remindBeforeSeconds": st.one_of(st.lists(numbers, max_size=3), json_values),
    },
)
"""The demo agent's ``forwardedProps``, with odd values."""
edited_args = st.fixed_dictionaries({"to": texts, "subject": texts, "body": texts})
payloads = st.one_of(
    st.sampled_from([{"approved": True}, {"approved": False}, {}]),
    st.fixed_dictionaries(
        {"approved": st.one_of(st.booleans(), json_values)},
        optional={"editedArgs": st.one_of(edited_args, json_values)},
    ),
    json_values,
)
resume_entries = st.fixed_dictionaries(
    {"interruptId": interrupt_ids, "status": st.sampled_from(["resolved", "cancelled"])},
    optional={"payload": payloads, "metadata": st.dictionaries(odd_text, json_values)},
)
resumes = st.one_of(
    st.lists(resume_entries, max_size=3),
    # The interrupt draft's resume: one object.
    st.fixed_dictionaries({"interruptId": interrupt_ids}, optional={"payload": payloads}),
)
well_typed_bodies = st.fixed_dictionaries(
    {"threadId": thread_ids, "runId": odd_text, "messages": st.lists(messages, max_size=3)},
    optional={
        "resume": st.one_of(resumes, st.none()),
        "state": st.one_of(st.dictionaries(odd_text, any_json, max_size=3), any_json),
        "tools": tools,
        "context": contexts,
        "forwardedProps": st.one_of(forwarded, any_json),
        "parentRunId": odd_text,
        "extra": any_json,
    },
)
"""Bodies the gateway reads as a ``RunAgentInput``, every value hostile: they reach the
thread's own checks (and, for another thread, an agent)."""


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` two times in three, else any JSON."""
    return st.one_of(valid, valid, any_json)


ill_typed_bodies = st.fixed_dictionaries(
    {
        "threadId": mostly(thread_ids),
        "runId": mostly(odd_text),
        "messages": mostly(st.lists(mostly(messages), max_size=3)),
    },
    optional={
        "resume": mostly(st.one_of(st.lists(mostly(resume_entries), max_size=3), resumes)),
        "tools": mostly(st.lists(mostly(tools), max_size=2)),
        "context": mostly(st.lists(mostly(contexts), max_size=2)),
        "parentRunId": any_json,
        "protocolVersion": any_json,
    },
)
"""Bodies with values of the wrong type here and there (and deep nesting, NaN...)."""
run_bodies = st.one_of(well_typed_bodies, ill_typed_bodies)
"""``RunAgentInput``-like bodies, mostly for the waiting thread, every field hostile."""


def fill(value: Any, waiting: WaitingThread) -> Any:
    """``value`` with :data:`WAITING`, :data:`NEW_THREAD` and :data:`OPEN_INTERRUPT`
    replaced by real ids."""
    if value == WAITING:
        return waiting.thread_id
    if value == NEW_THREAD:
        return new_thread()
    if value == OPEN_INTERRUPT:
        return waiting.interrupt_id
    if isinstance(value, list):
        return [fill(item, waiting) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, waiting) for key, item in value.items()}
    return value


def encode(value: Any) -> bytes:
    """``value`` as JSON text (NaN and infinities as Python writes them), each
    :data:`DEEP` marker replaced by that deep a nesting."""
    text = json.dumps(value)
    for depth in set(_depths(value)):
        text = text.replace(json.dumps(_deep(depth)), "[" * depth + "]" * depth)
    return text.encode()


def _depths(value: Any) -> list[int]:
    if isinstance(value, str) and value.startswith(DEEP):
        return [int(value.removeprefix(DEEP))]
    if isinstance(value, list):
        return [depth for item in value for depth in _depths(item)]
    if isinstance(value, dict):
        return [depth for item in value.values() for depth in _depths(item)]
    return []


@dataclass(frozen=True)
class Sent:
    """A request as sent, shown short in failure reports (tokens cut)."""

    path: str
    headers: dict[str, str]
    body: bytes
    method: str = "POST"

    def __str__(self) -> str:
        headers = {
            name: value[:20] + "..." if name.lower() == "authorization" else value
            for name, value in self.headers.items()
        }
        body = self.body if len(self.body) <= 600 else self.body[:600] + b"..."
        return f"{self.method} {self.path} {headers} ({len(self.body)} bytes) {body!r}"


@dataclass(frozen=True)
class Aim:
    """What a request would do to the waiting thread, were it accepted."""

    thread_id: Any
    """The body's ``threadId``, if it has one."""
    owner: bool
    """Sent with the owner's token."""
    resumes: bool
    """With a ``resume`` that is not empty."""
    may_erase: bool = False
    """Sent by someone who may delete the thread: its owner or an admin."""


async def check_request(waiting: WaitingThread, sent: Sent, aim: Aim) -> None:
    """Send ``sent``; its answer keeps the contracts, and the waiting thread is unchanged
    unless it accepted the run, which only its owner's resume may make it do, or deleted
    it, which only its owner or an admin may.

    Raises:
        AssertionError: A property does not hold (the thread is made whole first).
        Wedged: No complete answer in time, or the stack did not recover.
    """
    async with httpx.AsyncClient(base_url=waiting.stack.url, timeout=REQUEST_SECONDS) as http:
        try:
            async with asyncio.timeout(REQUEST_SECONDS):
                response = await http.request(
                    sent.method, sent.path, content=sent.body, headers=sent.headers
                )
        except (httpx.TransportError, TimeoutError) as err:
            raise Wedged(f"no complete answer ({err!r}) to {sent}") from err
    try:
        content_type = response.headers.get("content-type", "")
        draft = "compat=draft" in sent.path
        status, body = response.status_code, response.content
        run = sent.method == "POST"
        rejected = judge(status, content_type, body, run, aim.thread_id, draft)
        if not rejected and sent.method == "DELETE" and sent.path == waiting.path:
            assert aim.may_erase, f"the waiting thread was deleted by someone who may not: {sent}"
            await waiting.assert_erased(sent)
            await waiting.start()
            return
        if rejected or not run or aim.thread_id != waiting.thread_id:
            await waiting.assert_unchanged(sent)
            return
        assert aim.owner, f"the waiting thread ran someone else's input: {sent}"
        assert aim.resumes, f"the waiting thread ran input without a resume: {sent}"
    except AssertionError as err:
        await waiting.recover(sent)
        raise AssertionError(f"{err}\nrequest: {sent}") from err
    # The owner's resume answered the interrupt: the thread moved on, as it should.
    if await waiting.is_waiting():
        await waiting.look()
    else:
        await waiting.start()


def _resumes(body: dict[str, Any]) -> bool:
    resume = body.get("resume")
    return isinstance(resume, list | dict) and bool(resume)


async def fuzz(
    strategy: st.SearchStrategy[T],
    examples: int,
    known: Sequence[T],
    check: Callable[[T], Coroutine[Any, Any, None]],
) -> None:
    """Run ``check`` on the ``known`` values, then on ``examples`` values of ``strategy``:
    hypothesis drives from a worker thread, each check runs on this event loop."""
    loop = asyncio.get_running_loop()

    def one(value: T) -> None:
        asyncio.run_coroutine_threadsafe(check(value), loop).result()

    test = given(value=strategy)(one)
    for value in reversed(known):
        test = example(value=value)(test)
    await asyncio.to_thread(fuzzing(examples)(test))


def _user_says(text: str) -> list[dict[str, str]]:
    return [{"id": "m1", "role": "user", "content": text}]


KNOWN_BODIES: list[dict[str, Any]] = [
    {"threadId": WAITING, "runId": "\ud800", "messages": []},
    {"threadId": WAITING, "runId": "r", "messages": [], "state": {"a": _deep(200)}},
    {"threadId": WAITING, "runId": "r", "messages": [], "state": {"a": _deep(300)}},
    {"threadId": WAITING, "runId": "r", "messages": [], "state": {"a": _deep(5_000)}},
    {"threadId": WAITING, "runId": "x" * 1_000, "messages": []},
    {"threadId": "t" * 1_000, "runId": "r", "messages": []},
    {"threadId": NEW_THREAD, "runId": "r", "messages": _user_says("x" * 200_000)},
    {"threadId": WAITING, "runId": "r", "messages": _user_says("x" * 2_500_000)},
]
"""Bodies that once broke the gateway or a thread, tried first on every run (lone
surrogate; JSON too deep for the worker to decode, for the gateway to serialise, or to
parse; ids over Temporal's length limits; a long message for the agent's regular
expressions; a body over Temporal's payload limit).
Those that leave a request hanging come last, as the first of them ends the test."""


async def test_hostile_run_bodies_leave_a_waiting_thread_unchanged(
    waiting: WaitingThread,
) -> None:
    headers = {**bearer(), "content-type": "application/json"}

    async def check(body: dict[str, Any]) -> None:
        filled = fill(body, waiting)
        aim = Aim(filled["threadId"], owner=True, resumes=_resumes(filled))
        await check_request(waiting, Sent("/agents/demo", headers, encode(filled)), aim)

    await fuzz(run_bodies, 300, KNOWN_BODIES, check)

    await waiting.assert_resumable()


def _signed(claims: dict[str, Any], key: str, algorithm: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {jwt.encode(claims, key, algorithm)}"}


def authorization(caller: str) -> dict[str, str]:
    """The ``Authorization`` header of one of :data:`callers` (else ``caller`` as is)."""
    now = int(time.time())
    claims: dict[str, Any] = {"sub": OWNER, "iat": now, "exp": now + 600}
    match caller:
        case "owner":
            return bearer()
        case "someone else":
            return bearer("mallory")
        case "admin":
            return bearer("root", [ADMIN_GROUP])
        case "odd subject":
            return bearer("é😀\u202e\x00" * 64)
        case "expired":
            return _signed({**claims, "exp": now - 3600}, TEST_SECRET, "HS256")
        case "forged":
            return _signed(claims, "not the gateway's secret, but long enough", "HS256")
        case "unsigned":
            return _signed(claims, "", "none")
        case "none":
            return {}
    return {"Authorization": caller}


callers = st.sampled_from(
    ["owner", "owner", "someone else", "admin", "odd subject", "expired", "forged", "unsigned"]
    + ["none", "Bearer", "Bearer x.y.z", "Basic YWxpY2U6cHc=", "bearer"]
)
ascii_text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=24)
content_types = st.one_of(
    st.sampled_from(
        [
            None,
            "application/json",
            "application/json; charset=utf-8",
            "application/json; charset=utf-16",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/xml",
            "application/merge-patch+json",
        ]
    ),
    ascii_text,
)
raw_bodies = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"", b"null", b"{", b"[]", b"{}", b'"x"', b"1e999999", b"NaN", b"\xff\xfe{}"]),
    st.integers(1, 200_000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(1, 200_000).map(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth),
    st.integers(1, 5_000_000).map(lambda size: b" " * size + b"{}"),
    run_bodies,
)
paths = st.one_of(
    st.sampled_from(["/agents/demo", "/agents/demo?compat=draft", "/agents/files"]),
    st.sampled_from(["/agents", "/agents/demo/", "/agents/demo/capabilities", "/nowhere"]),
    st.just(f"/threads/{WAITING}"),
    ascii_text.map(lambda compat: f"/agents/demo?compat={compat}"),
    st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="/?#"),
        min_size=1,
        max_size=24,
    ).map(lambda agent: f"/agents/{agent}"),
)
extra_headers = st.dictionaries(
    st.sampled_from(["content-encoding", "accept", "last-event-id", "accept-encoding"]),
    ascii_text,
    max_size=2,
)


@dataclass(frozen=True)
class RawRequest:
    method: str
    path: str
    caller: str
    content_type: str | None
    body: bytes | dict[str, Any]
    """Bytes as they are, or a :data:`run_bodies` body to fill in and encode."""
    headers: dict[str, str]


methods = usually("POST", st.sampled_from(["GET", "PUT", "PATCH", "DELETE", "OPTIONS"]))
raw_requests = st.builds(
    RawRequest, methods, paths, callers, content_types, raw_bodies, extra_headers
)


KNOWN_RAW_REQUESTS = [
    RawRequest("POST", "/agents/demo", "owner", "application/json", b"1e999999", {}),
    RawRequest("POST", "/agents/demo", "owner", "application/json", b"[" * 5_000, {}),
    RawRequest("POST", "/nowhere", "owner", None, b"", {}),
    RawRequest("PUT", "/agents/demo", "owner", None, b"", {}),
    RawRequest("DELETE", f"/threads/{WAITING}", "someone else", None, b"", {}),
    RawRequest("DELETE", f"/threads/{WAITING}", "owner", "application/json", b"[" * 50_000, {}),
]
"""Requests tried first on every run: ones that once broke the gateway (an infinite
number; nesting too deep to parse; a route or a method it does not serve), and the
waiting thread deleted by someone else, then by its owner (which once broke this test:
an owner's deletion is no rejected request)."""


async def test_raw_requests_leave_a_waiting_thread_unchanged(waiting: WaitingThread) -> None:
    async def check(raw: RawRequest) -> None:
        headers = {**raw.headers, **authorization(raw.caller)}
        if raw.content_type is not None:
            headers["content-type"] = raw.content_type
        aim = Aim(
            None,
            owner=raw.caller == "owner",
            resumes=False,
            may_erase=raw.caller in ("owner", "admin"),
        )
        body = raw.body
        if isinstance(body, dict):
            filled = fill(body, waiting)
            aim = replace(aim, thread_id=filled["threadId"], resumes=_resumes(filled))
            body = encode(filled)
        path = raw.path.replace(WAITING, waiting.thread_id)
        await check_request(waiting, Sent(path, headers, body, raw.method), aim)

    await fuzz(raw_requests, 200, KNOWN_RAW_REQUESTS, check)

    await waiting.assert_resumable()
