"""The agents this gateway serves: ``GET /agents`` and ``GET /agents/{agent_id}/capabilities``."""

from __future__ import annotations

from typing import Any

from ag_ui.core import AgentCapabilities
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.deps import AgentDep
from workflows.agents import AGENTS

router = APIRouter()


@router.get("/agents")
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


@router.get("/agents/{agent_id}/capabilities")
async def capabilities(agent: AgentDep) -> JSONResponse:
    """The agent's AG-UI ``AgentCapabilities``."""
    declared: AgentCapabilities = agent.capabilities()
    return JSONResponse(declared.model_dump(mode="json", by_alias=True))
