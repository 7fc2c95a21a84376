"""The FastAPI application: AG-UI endpoints over the thread workflows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from temporalio.client import Client

from gateway import agents, ops, runs, threads
from gateway.errors import ApiError, api_error_handler
from gateway.metrics import GatewayMetrics, RequestCounter
from settings import Settings, connect


def create_app(settings: Settings | None = None, client: Client | None = None) -> FastAPI:
    """Build the gateway.

    Args:
        settings: Defaults to the environment's.
        client: A connected Temporal client to use; by default one is created (lazily,
            so the gateway starts even while Temporal is down) when the app starts.
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
    app.add_middleware(RequestCounter, metrics=metrics)
    app.add_exception_handler(ApiError, api_error_handler)
    for router in (runs.router, agents.router, threads.router, ops.router):
        app.include_router(router)
    return app
