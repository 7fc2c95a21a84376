"""What the gateway observes: its Prometheus metrics (``GET /metrics`` adds the Temporal
SDK's) and the log line of each run it streams.

The gateway counts what passes through it: requests, how long streams stay open, how
runs end and the codes of the errors it sends. Interrupts are counted by the thread
workflow, where they open, close and expire (``workflows/metrics.py``), and exported by
the worker's runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from ag_ui.core import BaseEvent, RunAgentInput, RunErrorEvent, RunFinishedEvent
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from temporalio.runtime import Runtime

from gateway.sdk_metrics import SDK_DRAIN_SECONDS, SdkMetrics
from settings import telemetry_runtime

T = TypeVar("T")
log = logging.getLogger("agui.gateway")

STREAM_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
"""Seconds: a short run streams for tens of milliseconds, an attached client for minutes."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class GatewayMetrics:
    """One gateway's metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "agui_gateway_requests",
            "HTTP requests answered, by route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.stream_seconds = Histogram(
            "agui_gateway_stream_seconds",
            "How long SSE streams stay open",
            ["route"],
            buckets=STREAM_BUCKETS,
            registry=self.registry,
        )
        self.runs = Counter(
            "agui_gateway_runs",
            "Runs streamed to clients, by how they ended: success, interrupt or error",
            ["agent", "outcome"],
            registry=self.registry,
        )
        self.run_errors = Counter(
            "agui_gateway_run_errors",
            "RUN_ERROR events sent, by code (resume rejections among them)",
            ["code"],
            registry=self.registry,
        )

    async def observe_run(
        self,
        agent: str,
        run_input: RunAgentInput,
        pages: AsyncIterator[list[tuple[T, BaseEvent]]],
    ) -> AsyncIterator[list[tuple[T, BaseEvent]]]:
        """``pages`` of events unchanged; counts and logs how the run ends."""
        async for page in pages:
            for _, event in page:
                if isinstance(event, RunFinishedEvent | RunErrorEvent):
                    self._run_ended(agent, run_input, event)
            yield page

    def _run_ended(
        self, agent: str, run_input: RunAgentInput, event: RunFinishedEvent | RunErrorEvent
    ) -> None:
        code = None
        outcome: str
        if isinstance(event, RunErrorEvent):
            outcome, code = "error", event.code or "UNCODED"
            self.run_errors.labels(code).inc()
        else:
            outcome = event.outcome.type if event.outcome else "success"
        self.runs.labels(agent, outcome).inc()
        log.info(
            "run streamed",
            extra={
                "thread_id": run_input.thread_id,
                "run_id": run_input.run_id,
                "agent": agent,
                "outcome": outcome,
                "code": code,
            },
        )

    async def time_stream(self, route: str, items: AsyncIterator[T]) -> AsyncIterator[T]:
        """``items`` unchanged, timing the stream from its first to its last."""
        started = time.monotonic()
        try:
            async for item in items:
                yield item
        finally:
            self.stream_seconds.labels(route).observe(time.monotonic() - started)

    def exposition(self) -> bytes:
        """The gateway's metrics in Prometheus text format, its Temporal client's among
        them when it made that client (:meth:`sdk_runtime`)."""
        return generate_latest(self.registry)

    @contextlib.asynccontextmanager
    async def sdk_runtime(self) -> AsyncIterator[Runtime]:
        """A Temporal runtime for the gateway's own client, whose SDK metrics
        :meth:`exposition` then includes, for as long as the block runs."""
        sdk = SdkMetrics()
        runtime = telemetry_runtime(sdk.buffer)
        self.registry.register(sdk)
        draining = asyncio.create_task(sdk.drain_every(SDK_DRAIN_SECONDS))
        try:
            yield runtime
        finally:
            draining.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await draining
            self.registry.unregister(sdk)


class RequestCounter:
    """ASGI middleware counting every answered request by its route template (not its
    path, which would make a series per thread). Pure ASGI, so streams pass untouched."""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                route = scope.get("route")
                template = getattr(route, "path", "unmatched")
                self._metrics.requests.labels(
                    scope["method"], template, str(message["status"])
                ).inc()
            await send(message)

        await self._app(scope, receive, counting_send)
