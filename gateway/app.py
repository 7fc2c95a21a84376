"""The FastAPI application: AG-UI endpoints over the thread workflows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Annotated, Any, Literal

from ag_ui.core import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    BaseEvent,
    RunAgentInput,
    RunStartedEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from opentelemetry import trace
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import ValidationError
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from gateway.compat import DRAFT, encode_draft, normalise_draft_resume
from gateway.errors import (
    RUN_FAILURES,
    TEMPORAL_ERRORS,
    ApiError,
    GatewayErrorCode,
    api_error_handler,
    run_error_from,
    temporal_unavailable,
)
from gateway.inbox import InvalidCursor, list_interrupts, list_threads, thread_query
from gateway.metrics import GatewayMetrics, RequestCounter
from gateway.streaming import RunStream, attach, find_run, start_run, thread_handle
from settings import Settings, connect
from workflows.agents import AGENTS
from workflows.models import SequencedEvent, ThreadStatus
from workflows.runtime import Agent
from workflows.thread import ThreadWorkflow

tracer = trace.get_tracer("agui.gateway")


def create_app(settings: Settings | None = None, client: Client | None = None) -> FastAPI:
    """Build the gateway.

    Args:
        settings: Defaults to the environment's.
        client: A connected Temporal client to use; by default one is created (lazily,
            so the gateway starts even while Temporal is down) when the app starts.
    """
    resolved = settings or Settings()
    metrics = GatewayMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if client is not None:
            app.state.client = client
            yield
            return
        async with metrics.sdk_runtime() as runtime:
            app.state.client = await connect(lazy=True, runtime=runtime)
            yield

    app = FastAPI(title="AG-UI on Temporal", lifespan=lifespan)
    app.state.settings = resolved
    app.state.metrics = metrics
    app.add_middleware(RequestCounter, metrics=metrics)
    app.add_exception_handler(ApiError, api_error_handler)
    _add_routes(app)
    return app


# Dependencies are coroutines, even those that never await: FastAPI runs a plain function
# in its thread pool, a thread hop per dependency per request.
async def _client(request: Request) -> Client:
    client: Client = request.app.state.client
    return client


async def _metrics(request: Request) -> GatewayMetrics:
    metrics: GatewayMetrics = request.app.state.metrics
    return metrics


async def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def _agent(agent_id: str) -> Agent:
    agent = AGENTS.get(agent_id)
    if agent is None:
        raise ApiError(
            404,
            GatewayErrorCode.UNKNOWN_AGENT,
            f"No agent named {agent_id!r}; known agents: {', '.join(sorted(AGENTS))}.",
        )
    return agent


async def _run_input(request: Request) -> RunAgentInput:
    """The request body as a ``RunAgentInput``, or a 400/422 saying what is wrong."""
    try:
        body: Any = json.loads(await request.body())
    except ValueError as err:
        raise ApiError(
            400, GatewayErrorCode.MALFORMED_JSON, f"The body is not valid JSON: {err}."
        ) from err
    try:
        return RunAgentInput.model_validate(normalise_draft_resume(body))
    except ValidationError as err:
        raise ApiError(
            422,
            GatewayErrorCode.INVALID_RUN_INPUT,
            "The body is not an AG-UI RunAgentInput.",
            details=json.loads(err.json(include_url=False, include_context=False)),
        ) from err


ClientDep = Annotated[Client, Depends(_client)]
SettingsDep = Annotated[Settings, Depends(_settings)]
MetricsDep = Annotated[GatewayMetrics, Depends(_metrics)]
AgentDep = Annotated[Agent, Depends(_agent)]
RunInputDep = Annotated[RunAgentInput, Depends(_run_input)]


Streamed = tuple[int | None, BaseEvent]
"""An event to send and its SSE ``id``: its ``seq`` in the thread's event log, or
``None`` for an event the thread never recorded (the ``RUN_ERROR`` of a rejected run)."""
Page = list[Streamed]
"""Events that arrived together: the gateway writes them to the client in one chunk."""


def _streamed(page: list[SequencedEvent]) -> Page:
    """A page of the thread's events, each with its ``seq`` as its SSE ``id``."""
    return [(item.seq, item.event) for item in page]


async def _guarded(run_input: RunAgentInput, stream: RunStream) -> AsyncIterator[Page]:
    """The run's events, always closed by ``RUN_FINISHED`` or ``RUN_ERROR``.

    A run the thread rejected never started there, but AG-UI requires every run to open
    with ``RUN_STARTED``, so the gateway opens it before reporting the error; the thread
    records none of it.
    """
    started = False
    try:
        async for page in stream.pages():
            started = True
            yield _streamed(page)
    except RUN_FAILURES as err:
        error: Page = [(None, run_error_from(err))]
        if started:
            yield error
        else:
            opening = RunStartedEvent(
                thread_id=run_input.thread_id,
                run_id=run_input.run_id,
                protocol_version=PROTOCOL_VERSION,
            )
            yield [(None, opening), *error]


def _sse(pages: AsyncIterator[Page], compat: str | None = None) -> StreamingResponse:
    """An AG-UI event stream as a ``text/event-stream`` response, a chunk per page.

    Args:
        pages: The events to send, each with its SSE ``id``.
        compat: ``"draft"`` to send interrupts in the earlier draft's shape too.
    """
    encoder = EventEncoder()

    def encode(seq: int | None, event: BaseEvent) -> str:
        data = (
            f"data: {json.dumps(encode_draft(event))}\n\n"
            if compat == DRAFT
            else encoder.encode(event)
        )
        return data if seq is None else f"id: {seq}\n{data}"

    async def body() -> AsyncIterator[str]:
        async for page in pages:
            yield "".join(encode(seq, event) for seq, event in page)

    return StreamingResponse(
        body(),
        media_type=encoder.get_content_type(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _event_id(value: str | None) -> int:
    """An SSE event id as sent by the gateway (a non-negative integer); 0 when absent."""
    if value is None:
        return 0
    if not value.isdigit():
        raise ApiError(
            422,
            GatewayErrorCode.INVALID_EVENT_ID,
            f"{value!r} is not an event id of this gateway; ids are non-negative integers.",
        )
    return int(value)


def _visibility_query(
    settings: Settings,
    agent: str | None = None,
    status: ThreadStatus | None = None,
    reason: str | None = None,
) -> str:
    """The visibility query for the filters, or a 422 naming the bad one."""
    if agent is not None and agent not in AGENTS:
        raise ApiError(
            422,
            GatewayErrorCode.INVALID_FILTER,
            f"No agent named {agent!r}; known agents: {', '.join(sorted(AGENTS))}.",
        )
    try:
        return thread_query(settings.task_queue, agent=agent, status=status, reason=reason)
    except ValueError as err:
        raise ApiError(422, GatewayErrorCode.INVALID_FILTER, str(err)) from err


@contextmanager
def _listing_errors() -> Iterator[None]:
    """A listing's failures as HTTP errors: a bad cursor is 422, Temporal down 503."""
    try:
        yield
    except InvalidCursor as err:
        raise ApiError(422, GatewayErrorCode.INVALID_CURSOR, str(err)) from err
    except TEMPORAL_ERRORS as err:
        raise temporal_unavailable(err) from err


def _thread_error(thread_id: str, err: Exception) -> ApiError:
    """A failed read of a thread: 404 when it does not exist, else Temporal is unavailable."""
    if isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND:
        return ApiError(404, GatewayErrorCode.UNKNOWN_THREAD, f"No thread {thread_id!r}.")
    return temporal_unavailable(err)


def _add_routes(app: FastAPI) -> None:
    @app.post("/agents/{agent_id}", response_class=StreamingResponse)
    async def run_agent(
        agent: AgentDep,
        run_input: RunInputDep,
        client: ClientDep,
        settings: SettingsDep,
        metrics: MetricsDep,
        compat: Annotated[Literal["draft"] | None, Query()] = None,
    ) -> StreamingResponse:
        """Run the agent on ``run_input.threadId`` and stream the run's AG-UI events.

        ``?compat=draft`` adds the earlier interrupt draft's ``RUN_FINISHED`` shape.
        """
        attributes = {
            "agui.agent": agent.name,
            "agui.thread_id": run_input.thread_id,
            "agui.run_id": run_input.run_id,
        }
        # The trace's root: Temporal's interceptor continues it into the workflow.
        with tracer.start_as_current_span("AG-UI run", attributes=attributes):
            try:
                stream = await start_run(client, settings, agent.name, run_input)
            except TEMPORAL_ERRORS as err:
                raise temporal_unavailable(err) from err
        pages = metrics.observe_run(agent.name, run_input, _guarded(run_input, stream))
        return _sse(metrics.time_stream("/agents/{agent_id}", pages), compat)

    @app.get("/agents")
    async def list_agents() -> dict[str, Any]:
        """Every agent this gateway serves, with its capabilities."""
        return {
            "agents": [
                {
                    "name": agent.name,
                    "description": agent.description,
                    "capabilities": agent.capabilities().model_dump(mode="json", by_alias=True),
                }
                for agent in AGENTS.values()
            ]
        }

    @app.get("/agents/{agent_id}/capabilities")
    async def capabilities(agent: AgentDep) -> JSONResponse:
        """The agent's AG-UI ``AgentCapabilities``."""
        declared: AgentCapabilities = agent.capabilities()
        return JSONResponse(declared.model_dump(mode="json", by_alias=True))

    @app.get("/threads")
    async def threads(
        client: ClientDep,
        settings: SettingsDep,
        agent: Annotated[str | None, Query()] = None,
        status: Annotated[ThreadStatus | None, Query()] = None,
        page_size: Annotated[int, Query(alias="pageSize", ge=1, le=1000)] = 100,
        page_token: Annotated[str | None, Query(alias="pageToken")] = None,
    ) -> JSONResponse:
        """Threads served by this gateway's task queue, with their status."""
        query = _visibility_query(settings, agent=agent, status=status)
        with _listing_errors():
            page = await list_threads(client, query, page_size, page_token)
        return JSONResponse(page.model_dump(mode="json", by_alias=True))

    @app.get("/interrupts")
    async def interrupts(
        client: ClientDep,
        settings: SettingsDep,
        agent: Annotated[str | None, Query()] = None,
        reason: Annotated[str | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        cursor: Annotated[str | None, Query()] = None,
    ) -> JSONResponse:
        """Open interrupts across threads, soonest deadline first: an approval inbox."""
        query = _visibility_query(settings, agent=agent, status="waiting", reason=reason)
        with _listing_errors():
            page = await list_interrupts(client, query, reason, limit, cursor)
        return JSONResponse(page.model_dump(mode="json", by_alias=True, exclude_none=True))

    @app.get("/threads/{thread_id}")
    async def thread(thread_id: str, client: ClientDep) -> JSONResponse:
        """The thread's messages, state and runs."""
        try:
            view = await thread_handle(client, thread_id).query(ThreadWorkflow.view)
        except TEMPORAL_ERRORS as err:
            raise _thread_error(thread_id, err) from err
        return JSONResponse(view.model_dump(mode="json", by_alias=True))

    @app.get("/threads/{thread_id}/runs/{run_id}/events", response_class=StreamingResponse)
    async def run_events(
        thread_id: str,
        run_id: str,
        client: ClientDep,
        settings: SettingsDep,
        metrics: MetricsDep,
        after: Annotated[str | None, Query()] = None,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        """The run's events after event id ``after`` (or ``Last-Event-ID``), then its live
        rest: how a client resumes a lost stream, attaches to a run in flight, or re-reads
        a finished one. With neither, the whole run."""
        offset = _event_id(after if after is not None else last_event_id)
        thread = thread_handle(client, thread_id)
        try:
            run = await find_run(thread, run_id)
        except TEMPORAL_ERRORS as err:
            raise _thread_error(thread_id, err) from err
        if run is None:
            raise ApiError(
                404, GatewayErrorCode.UNKNOWN_RUN, f"Thread {thread_id!r} has no run {run_id!r}."
            )

        async def pages() -> AsyncIterator[Page]:
            async for page in attach(thread, run, offset, settings.stream_poll_seconds):
                yield _streamed(page)

        return _sse(metrics.time_stream("/threads/{thread_id}/runs/{run_id}/events", pages()))

    @app.get("/metrics")
    async def prometheus(metrics: MetricsDep) -> Response:
        """Prometheus metrics: the gateway's (``agui_gateway_*``) and, when the gateway
        made its own Temporal client, the SDK's (``temporal_*``)."""
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    async def healthz(client: ClientDep, settings: SettingsDep) -> JSONResponse:
        """Whether the gateway can reach Temporal."""
        timeout = timedelta(seconds=settings.healthz_timeout_seconds)
        try:
            healthy = await client.service_client.check_health(timeout=timeout)
            detail = "ok" if healthy else "Temporal reports its service as not serving"
        except TEMPORAL_ERRORS as err:
            healthy, detail = False, f"Temporal is unreachable: {err}"
        return JSONResponse(
            {"status": "ok" if healthy else "unavailable", "temporal": detail},
            status_code=200 if healthy else 503,
        )
