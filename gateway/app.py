"""The FastAPI application: AG-UI endpoints over the thread workflows."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from temporalio.client import Client

from gateway import agents, ops, runs, threads
from gateway.errors import ApiError, api_error_handler, validation_error_handler
from gateway.metrics import GatewayMetrics, RequestCounter
from settings import Settings, connect
from workflows.sdk.agent import AgentDefinition
from workflows.served import by_name

ROUTERS = (runs.router, agents.router, threads.router, ops.router)
"""Every route of the gateway, by what it owns."""


def create_app(
    agents: Iterable[AgentDefinition],
    settings: Settings | None = None,
    client: Client | None = None,
) -> FastAPI:
    """Build the gateway.

    Args:
        agents: The agents to serve. The workers of the task queue must serve them too
            (``worker.build_worker``): they run them.
        settings: Defaults to the environment's.
        client: A connected Temporal client to use; by default one is created (lazily,
            so the gateway starts even while Temporal is down) when the app starts.

    Raises:
        ValueError: Two agents share a name.
    """
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
    app.state.settings = settings or Settings()
    app.state.metrics = metrics
    app.state.agents = by_name(agents)
    app.add_middleware(RequestCounter, metrics=metrics)
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    for router in ROUTERS:
        app.include_router(router)
    return app
