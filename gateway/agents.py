"""The agents this gateway serves: ``GET /agents`` and ``GET /agents/{agent_id}/capabilities``."""

from __future__ import annotations

from ag_ui.core import AgentCapabilities
from fastapi import APIRouter

from gateway.deps import AUTHENTICATED, AgentDep, AgentsDep
from workflows.models import Model

router = APIRouter(dependencies=AUTHENTICATED)


class AgentSummary(Model):
    """One agent as ``GET /agents`` lists it."""

    name: str
    description: str
    capabilities: AgentCapabilities


class AgentList(Model):
    agents: list[AgentSummary]


@router.get("/agents")
async def list_agents(agents: AgentsDep) -> AgentList:
    """Every agent this gateway serves, with its capabilities."""
    return AgentList(
        agents=[
            AgentSummary(
                name=agent.name,
                description=agent.description,
                capabilities=agent.capabilities(),
            )
            for agent in agents.values()
        ]
    )


@router.get("/agents/{agent_id}/capabilities")
async def capabilities(agent: AgentDep) -> AgentCapabilities:
    """The agent's AG-UI ``AgentCapabilities``."""
    return agent.capabilities()
