"""What the routes depend on, as FastAPI dependencies: the Temporal client, the settings
and the metrics, which ``create_app`` sets on the app."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from temporalio.client import Client

from gateway.errors import ApiError, GatewayErrorCode
from gateway.metrics import GatewayMetrics
from settings import Settings
from workflows.agents import AGENTS
from workflows.runtime import Agent


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
        raise ApiError(404, GatewayErrorCode.UNKNOWN_AGENT, no_agent_named(agent_id))
    return agent


def no_agent_named(name: str) -> str:
    """The message for a request naming an agent the gateway does not serve."""
    return f"No agent named {name!r}; known agents: {', '.join(sorted(AGENTS))}."


ClientDep = Annotated[Client, Depends(_client)]
SettingsDep = Annotated[Settings, Depends(_settings)]
MetricsDep = Annotated[GatewayMetrics, Depends(_metrics)]
AgentDep = Annotated[Agent, Depends(_agent)]
"""The agent the path's ``agent_id`` names, or a 404."""
