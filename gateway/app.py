"""The FastAPI application: AG-UI endpoints over the thread workflows."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.client import Client

from gateway import agents, codec, decisions, oidc, ops, page, runs, signin, threads
from gateway.auth import Authenticator
from gateway.edge import AllowedHosts, BodyLimit, CodecCors, Cors, InternalErrors
from gateway.errors import (
    ApiError,
    api_error_handler,
    http_error_handler,
    validation_error_handler,
)
from gateway.limits import StreamSlots
from gateway.metrics import GatewayMetrics, RequestCounter
from gateway.sent_messages import SentMessageCache
from gateway.session import Sessions
from settings import Settings, connect
from workflows.sdk.agent import AgentDefinition
from workflows.served import by_name

logger = logging.getLogger(__name__)

ROUTERS = (
    runs.router,
    agents.router,
    threads.router,
    decisions.router,
    signin.router,
    page.router,
    ops.router,
    codec.router,
)
"""Every route of the gateway, by what it owns."""
KEYS_TIMEOUT_SECONDS = 5.0
"""How long fetching the identity provider's keys may take."""
EPHEMERAL_SESSIONS_WARNING = (
    "AGUI_SESSION_SECRET is unset: inbox sessions end when this gateway restarts, and a "
    "session signed by one replica is refused by the others. Set it (32+ characters, the "
    "same on every replica)."
)
ANONYMOUS_WARNING = (
    "AUTHENTICATION IS OFF (AGUI_AUTH_ANONYMOUS=true): anyone who can reach this gateway "
    "can read and answer every thread. Use this for a local experiment only."
)


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
        AuthConfigError: The settings name no way to verify tokens (``gateway.auth``),
            or half of the inbox page's OIDC client (``gateway.oidc``).
    """
    metrics = GatewayMetrics()
    settings = settings or Settings()
    # The provider's keys are fetched with a client of the app's own, closed with it.
    keys_http = httpx.AsyncClient(timeout=KEYS_TIMEOUT_SECONDS)
    auth = Authenticator(settings, keys_http)
    if auth.anonymous:
        logger.warning(ANONYMOUS_WARNING)
    # The inbox page's sign-in talks to the provider with a client of the app's own too.
    provider = oidc.OidcClient(settings) if oidc.configured(settings) else None
    if (provider or settings.inbox_dev_signin) and settings.session_secret is None:
        logger.warning(EPHEMERAL_SESSIONS_WARNING)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(keys_http)
            if provider is not None:
                await stack.enter_async_context(provider)
            if client is not None:
                app.state.client = client
                yield
                return
            async with metrics.sdk_runtime() as runtime:
                app.state.client = await connect(settings, lazy=True, runtime=runtime)
                yield

    # The API's description is served by ops (behind a token like every route but
    # /healthz); the interactive docs would load their scripts from a CDN.
    app = FastAPI(
        title="AG-UI on Temporal",
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.auth = auth
    app.state.sessions = Sessions(settings)
    app.state.oidc = provider
    app.state.metrics = metrics
    app.state.sent_messages = SentMessageCache()
    app.state.agents = by_name(agents)
    app.state.streams = StreamSlots(settings.max_streams_per_principal)
    # The codec server's: the one data converter's codec.
    app.state.payload_codec = settings.data_converter().payload_codec
    codec.redact_access_log()
    # The last added runs first: count every request, then check its Host, answer CORS,
    # catch what a route did not expect, and cap the body a route reads.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(InternalErrors)
    if settings.cors_origins:
        app.add_middleware(Cors, origins=settings.cors_origins)
    if settings.codec_origins:
        app.add_middleware(CodecCors, origins=settings.codec_origins)
    if settings.allowed_hosts:
        app.add_middleware(AllowedHosts, hosts=settings.allowed_hosts)
    app.add_middleware(RequestCounter, metrics=metrics)
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    for router in ROUTERS:
        app.include_router(router)
    return app
