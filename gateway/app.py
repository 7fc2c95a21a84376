"""The FastAPI application: AG-UI endpoints over the thread workflows."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from temporalio.client import Client

from gateway import agents, ops, runs, threads
from gateway.auth import Authenticator
from gateway.errors import ApiError, api_error_handler, validation_error_handler
from gateway.metrics import GatewayMetrics, RequestCounter
from settings import Settings, connect
from workflows.agents import AGENTS
from workflows.sdk.agent import AgentDefinition

logger = logging.getLogger(__name__)

ROUTERS = (runs.router, agents.router, threads.router, ops.router)
"""Every route of the gateway, by what it owns."""
KEYS_TIMEOUT_SECONDS = 5.0
"""How long fetching the identity provider's keys may take."""
ANONYMOUS_WARNING = (
    "AUTHENTICATION IS OFF (AGUI_AUTH_ANONYMOUS=true): anyone who can reach this gateway "
    "can read and answer every thread. Use this for a local experiment only."
)


def create_app(
    settings: Settings | None = None,
    client: Client | None = None,
    agents: Iterable[AgentDefinition] | None = None,
) -> FastAPI:
    """Build the gateway.

    Args:
        settings: Defaults to the environment's.
        client: A connected Temporal client to use; by default one is created (lazily,
            so the gateway starts even while Temporal is down) when the app starts.

    Raises:
        AuthConfigError: The settings name no way to verify tokens (``gateway.auth``).
        agents: The agents to serve; by default the engine's, ``workflows.agents.AGENTS``.
            The workers of the task queue must serve them too: they run them.
    """
    metrics = GatewayMetrics()
    settings = settings or Settings()
    # The provider's keys are fetched with a client of the app's own, closed with it.
    keys_http = httpx.AsyncClient(timeout=KEYS_TIMEOUT_SECONDS)
    auth = Authenticator(settings, keys_http)
    if auth.anonymous:
        logger.warning(ANONYMOUS_WARNING)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with keys_http:
            if client is not None:
                app.state.client = client
                yield
                return
            async with metrics.sdk_runtime() as runtime:
                app.state.client = await connect(lazy=True, runtime=runtime)
                yield

    app = FastAPI(title="AG-UI on Temporal", lifespan=lifespan)
    app.state.settings = settings
    app.state.auth = auth
    app.state.metrics = metrics
    app.state.agents = _by_name(AGENTS.values() if agents is None else agents)
    app.add_middleware(RequestCounter, metrics=metrics)
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    for router in ROUTERS:
        app.include_router(router)
    return app


def _by_name(agents: Iterable[AgentDefinition]) -> dict[str, AgentDefinition]:
    by_name: dict[str, AgentDefinition] = {}
    for agent in agents:
        if by_name.setdefault(agent.name, agent) is not agent:
            raise ValueError(f"Two agents are named {agent.name!r}.")
    return by_name
