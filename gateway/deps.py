"""What the routes depend on, as FastAPI dependencies: the Temporal client, the settings,
the metrics, the messages sent lately and the agents served, which ``create_app`` sets on
the app, the principal each request's bearer token (or the inbox page's session cookie)
names, a slot among the principal's open streams, and the ids in paths."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Annotated

from fastapi import Depends, Path, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from temporalio.client import Client

from gateway.auth import Authenticator, Principal
from gateway.errors import ApiError, GatewayErrorCode
from gateway.limits import ID_PATTERN, StreamSlots
from gateway.metrics import GatewayMetrics
from gateway.sent_messages import SentMessageCache
from gateway.session import SESSION_COOKIE, Sessions, check_csrf
from settings import Settings
from workflows.sdk.agent import AgentDefinition

Agents = Mapping[str, AgentDefinition]
"""The agents the gateway serves, by name."""


# Dependencies are coroutines, even those that never await: FastAPI runs a plain function
# in its thread pool, a thread hop per dependency per request.
async def _client(request: Request) -> Client:
    client: Client = request.app.state.client
    return client


async def _metrics(request: Request) -> GatewayMetrics:
    metrics: GatewayMetrics = request.app.state.metrics
    return metrics


async def _sent_message_cache(request: Request) -> SentMessageCache:
    cache: SentMessageCache = request.app.state.sent_messages
    return cache


async def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def _agents(request: Request) -> Agents:
    agents: Agents = request.app.state.agents
    return agents


_bearer = HTTPBearer(
    auto_error=False, description="A JWT of the configured issuer, or signed with the secret."
)


async def _principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Principal:
    return await _authenticated(request, credentials, csrf=True)


async def _reading_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Principal:
    return await _authenticated(request, credentials, csrf=False)


async def _authenticated(
    request: Request, credentials: HTTPAuthorizationCredentials | None, *, csrf: bool
) -> Principal:
    auth: Authenticator = request.app.state.auth
    cookie = request.cookies.get(SESSION_COOKIE)
    if credentials is None and cookie:
        # The inbox page: signed in with a session cookie, its changes CSRF-checked.
        sessions: Sessions = request.app.state.sessions
        session = sessions.read(cookie)
        if csrf:
            check_csrf(request, session)
        settings: Settings = request.app.state.settings
        return session.principal(settings.auth_admin_group)
    return await auth.principal(credentials.credentials if credentials else None)


ClientDep = Annotated[Client, Depends(_client)]
SettingsDep = Annotated[Settings, Depends(_settings)]
MetricsDep = Annotated[GatewayMetrics, Depends(_metrics)]
SentMessageCacheDep = Annotated[SentMessageCache, Depends(_sent_message_cache)]
AgentsDep = Annotated[Agents, Depends(_agents)]
PrincipalDep = Annotated[Principal, Depends(_principal)]
"""Who sent the request: the bearer token's principal or, without one, the session
cookie's (a 403 for its state-changing request without the CSRF token); a 401 without
either valid. A router that depends on it (as every router but ``GET /healthz``'s does)
has every route authenticated."""
ReadingPrincipalDep = Annotated[Principal, Depends(_reading_principal)]
"""The same principal, for a route that POSTs but changes nothing (the codec server's
``decode`` and ``encode``, whose callers do not hold the inbox page's CSRF token): a
session's request needs no CSRF token. Only such routes may use it."""
AUTHENTICATED = [Depends(_principal)]
"""Router dependencies: every route of the router needs a valid token."""


async def _stream_slot(request: Request, principal: PrincipalDep) -> AsyncIterator[None]:
    streams: StreamSlots = request.app.state.streams
    # A dependency with yield ends after the response is sent: a stream holds its slot
    # until it ends or its client goes away.
    with streams.hold(principal.subject):
        yield


STREAM_SLOT = Depends(_stream_slot)
"""Route dependency of every route that answers with an event stream: the stream holds
one of the principal's ``AGUI_MAX_STREAMS_PER_PRINCIPAL`` slots, or the request is a 429."""

ThreadIdPath = Annotated[str, Path(pattern=ID_PATTERN)]
"""A ``threadId`` in a path: an id as ``gateway.limits.ID_RULE`` says, or a 422
``INVALID_PARAMETER`` naming it (no run can have started such a thread)."""
RunIdPath = Annotated[str, Path(pattern=ID_PATTERN)]
"""A ``runId`` in a path, under the same rule."""
InterruptIdPath = Annotated[str, Path(pattern=ID_PATTERN)]
"""An ``interruptId`` in a path, under the same rule."""


async def _agent(agent_id: str, agents: AgentsDep) -> AgentDefinition:
    agent = agents.get(agent_id)
    if agent is None:
        raise ApiError(404, GatewayErrorCode.UNKNOWN_AGENT, no_agent_named(agent_id, agents))
    return agent


AgentDep = Annotated[AgentDefinition, Depends(_agent)]
"""The agent the path's ``agent_id`` names, or a 404."""


def no_agent_named(name: str, agents: Agents) -> str:
    """The message for a request naming an agent the gateway does not serve."""
    return f"No agent named {name!r}; known agents: {', '.join(sorted(agents))}."
