"""The agents this engine serves, by name.

The gateway routes ``POST /agents/{name}`` by this registry and the thread workflow runs
the agent it names, so both sides always agree on which agents exist.
"""

from __future__ import annotations

from workflows.agents.demo import DemoAgent
from workflows.runtime import Agent

AGENTS: dict[str, Agent] = {agent.name: agent for agent in (DemoAgent(),)}
