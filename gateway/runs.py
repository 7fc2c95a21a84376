"""Runs and their event streams: ``POST /agents/{agent_id}`` starts or resumes a run and
streams its AG-UI events; ``GET /threads/{thread_id}/runs/{run_id}/events`` reads a run
again, from any event on; ``GET /threads/{thread_id}/events`` follows the whole thread."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunStartedEvent,
    StateSnapshotEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from opentelemetry import trace
from pydantic import ValidationError

from gateway.auth import may_read
from gateway.compat import DRAFT, encode_draft, normalise_draft_resume
from gateway.deps import (
    AUTHENTICATED,
    STREAM_SLOT,
    AgentDep,
    ClientDep,
    MetricsDep,
    PrincipalDep,
    RunIdPath,
    SentMessageCacheDep,
    SettingsDep,
    ThreadIdPath,
)
from gateway.errors import (
    TEMPORAL_ERRORS,
    ApiError,
    GatewayErrorCode,
    run_error_from,
    temporal_error,
    thread_read_error,
    unknown_thread,
)
from gateway.event_json import encode_state_snapshot
from gateway.limits import ID_RULE, id_problems, json_bytes, parse_body
from gateway.sent_messages import Known, SentMessages
from gateway.streaming import (
    RunStream,
    attach,
    find_run,
    follow,
    read_log,
    start_run,
    thread_handle,
)
from workflows.models import SequencedEvent

tracer = trace.get_tracer("agui.gateway")
router = APIRouter(dependencies=AUTHENTICATED)

Streamed = tuple[int | None, BaseEvent]
"""An event to send and its SSE ``id``: its ``seq`` in the thread's event log, or
``None`` for an event the thread never recorded (the ``RUN_ERROR`` of a rejected run)."""
Page = list[Streamed]
"""Events that arrived together: the gateway writes them to the client in one chunk."""

KEEPALIVE = ": keepalive\n\n"
"""An SSE comment: what a stream with nothing to send sends, so proxies keep it open."""


@dataclass(frozen=True)
class RunBody:
    """A run request's body: its input, and its messages as the principal's
    ``SentMessageCache`` knows them."""

    input: RunAgentInput
    known: Known


async def _run_body(
    request: Request, principal: PrincipalDep, cache: SentMessageCacheDep
) -> RunBody:
    """The request body (JSON, ``gateway.limits.json_body``) as a ``RunAgentInput``, or
    a 4xx saying what is wrong; the messages the principal sent before, or was sent in
    its thread's last snapshot, are taken as validated then."""
    body = await json_bytes(request)
    resent = cache.resent(principal.subject, body)
    if resent is not None:
        read = _read(
            resent.body, cache.known(principal.subject, resent.body["messages"], resent.snapshot)
        )
        if read is not None:
            return read
    parsed = parse_body(body)
    messages = parsed.get("messages") if isinstance(parsed, dict) else None
    if isinstance(messages, list):
        read = _read(parsed, cache.known(principal.subject, messages))
        if read is not None:
            return read
    raise _refusal(parsed)


def _read(body: dict[str, Any], known: Known) -> RunBody | None:
    """``body`` as a run's input, its messages ``known``; ``None`` where it is not one,
    or breaks the id rule."""
    try:
        run_input = RunAgentInput.model_validate(
            normalise_draft_resume(body | {"messages": known.fresh()})
        )
    except ValidationError:
        return None
    run_input = run_input.model_copy(update={"messages": known.merged(run_input.messages)})
    if id_problems(run_input, known.checked()):
        return None
    return RunBody(run_input, known)


def _refusal(body: Any) -> ApiError:
    """The 422 for a ``body`` that is not a run's input, its details those of the body
    as sent (with the messages sent before in it too, where they are)."""
    try:
        run_input = RunAgentInput.model_validate(normalise_draft_resume(body))
    except ValidationError as err:
        details = json.loads(err.json(include_url=False, include_context=False))
        return ApiError(
            422,
            GatewayErrorCode.INVALID_RUN_INPUT,
            "The body is not an AG-UI RunAgentInput.",
            details=details,
        )
    problems = id_problems(run_input)
    if not problems:
        raise AssertionError("a body read differently with the messages sent before")
    return ApiError(
        422, GatewayErrorCode.INVALID_RUN_INPUT, f"Invalid ids. {ID_RULE}", details=problems
    )


RunBodyDep = Annotated[RunBody, Depends(_run_body)]


@router.post("/agents/{agent_id}", response_class=StreamingResponse, dependencies=[STREAM_SLOT])
async def run_agent(
    agent: AgentDep,
    body: RunBodyDep,
    principal: PrincipalDep,
    client: ClientDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    cache: SentMessageCacheDep,
    compat: Annotated[Literal["draft"] | None, Query()] = None,
) -> StreamingResponse:
    """Run the agent on ``run_input.threadId`` and stream the run's AG-UI events.

    ``?compat=draft`` adds the earlier interrupt draft's ``RUN_FINISHED`` shape.
    """
    run_input = body.input
    attributes = {
        "agui.agent": agent.name,
        "agui.thread_id": run_input.thread_id,
        "agui.run_id": run_input.run_id,
    }
    sent = cache.sent(body.known, run_input.messages, principal.subject, run_input.thread_id)
    # The trace's root: Temporal's interceptor continues it into the workflow.
    with tracer.start_as_current_span("AG-UI run", attributes=attributes):
        try:
            stream = await start_run(client, settings, agent, run_input, principal.subject, sent)
        except TEMPORAL_ERRORS as err:
            raise temporal_error(err, sent_input=True) from err
    pages = metrics.observe_run(agent.name, run_input, _guarded(run_input, stream))
    return _sse(metrics.time_stream("/agents/{agent_id}", pages), compat, sent)


@router.get(
    "/threads/{thread_id}/runs/{run_id}/events",
    response_class=StreamingResponse,
    dependencies=[STREAM_SLOT],
)
async def run_events(
    thread_id: ThreadIdPath,
    run_id: RunIdPath,
    principal: PrincipalDep,
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
        found = await find_run(thread, run_id)
    except TEMPORAL_ERRORS as err:
        raise thread_read_error(thread_id, err) from err
    if not may_read(principal, found.owner):
        raise unknown_thread(thread_id)
    run = found.run
    if run is None:
        raise ApiError(
            404, GatewayErrorCode.UNKNOWN_RUN, f"Thread {thread_id!r} has no run {run_id!r}."
        )

    async def pages() -> AsyncIterator[Page]:
        async for page in attach(thread, run, offset, settings.stream_poll_seconds):
            yield _streamed(page)

    return _sse(metrics.time_stream("/threads/{thread_id}/runs/{run_id}/events", pages()))


@router.get(
    "/threads/{thread_id}/events", response_class=StreamingResponse, dependencies=[STREAM_SLOT]
)
async def thread_events(
    thread_id: ThreadIdPath,
    principal: PrincipalDep,
    client: ClientDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    after: Annotated[str | None, Query()] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """Follow the thread: its events after event id ``after`` (or ``Last-Event-ID``;
    with neither, from the oldest event it carries), then each event as the thread logs
    it, whoever started the run (the client, another client, an approver's decision,
    an expiry, an operator). Stays open while the thread waits, with a keepalive
    comment every so often, until the client goes away."""
    offset = _event_id(after if after is not None else last_event_id)
    thread = thread_handle(client, thread_id)
    try:
        first = await read_log(thread, offset)
    except TEMPORAL_ERRORS as err:
        raise thread_read_error(thread_id, err) from err
    if not may_read(principal, first.owner):
        raise unknown_thread(thread_id)

    async def pages() -> AsyncIterator[Page]:
        events = follow(
            client,
            thread_id,
            offset,
            first,
            settings.stream_poll_seconds,
            settings.follow_poll_seconds,
        )
        async for page in events:
            yield _streamed(page)

    return _sse(metrics.time_stream("/threads/{thread_id}/events", pages()))


def _streamed(page: list[SequencedEvent]) -> Page:
    """A page of the thread's events, each with its ``seq`` as its SSE ``id``."""
    return [(item.seq, item.event) for item in page]


async def _guarded(run_input: RunAgentInput, stream: RunStream) -> AsyncIterator[Page]:
    """The run's events, always closed by ``RUN_FINISHED`` or ``RUN_ERROR``.

    A run the thread rejected never started there, but AG-UI requires every run to open
    with ``RUN_STARTED``, so the gateway opens it before reporting the error; the thread
    records none of it. Every failure ends the stream so: a rejection with the thread's
    code, Temporal's failures by theirs, anything unexpected as ``INTERNAL``.
    """
    started = False
    try:
        async for page in stream.pages():
            started = started or bool(page)  # an empty page is a keepalive
            yield _streamed(page)
    except Exception as err:
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


def _sse(
    pages: AsyncIterator[Page], compat: str | None = None, sent: SentMessages | None = None
) -> StreamingResponse:
    """An AG-UI event stream as a ``text/event-stream`` response, a chunk per page.

    Args:
        pages: The events to send, each with its SSE ``id``; an empty page sends a
            keepalive instead, a comment clients ignore.
        compat: ``"draft"`` to send interrupts in the earlier draft's shape too.
        sent: The messages of the request the run came with, whose JSON the run's
            ``MESSAGES_SNAPSHOT`` events reuse.
    """
    encoder = EventEncoder()

    def encode(seq: int | None, event: BaseEvent) -> str:
        if compat == DRAFT:
            data = f"data: {json.dumps(encode_draft(event))}\n\n"
        elif sent is not None and isinstance(event, MessagesSnapshotEvent):
            data = sent.encode_snapshot(event)
        elif isinstance(event, StateSnapshotEvent):
            data = encode_state_snapshot(event)
        else:
            data = encoder.encode(event)
        return data if seq is None else f"id: {seq}\n{data}"

    async def body() -> AsyncIterator[str]:
        async for page in pages:
            yield "".join(encode(seq, event) for seq, event in page) if page else KEEPALIVE

    return StreamingResponse(
        body(),
        media_type=encoder.get_content_type(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _event_id(value: str | None) -> int:
    """An SSE event id as sent by the gateway (a non-negative integer); 0 when absent."""
    if value is None:
        return 0
    if not (value.isascii() and value.isdigit()):
        raise ApiError(
            422,
            GatewayErrorCode.INVALID_EVENT_ID,
            f"{value!r} is not an event id of this gateway; ids are non-negative integers.",
        )
    return int(value)
