"""The agents this engine serves, by name.

The gateway routes ``POST /agents/{name}`` by this registry, the worker runs the
activities of every agent in it, and the thread workflow runs the agent it names, so all
three always agree on which agents exist.
"""

from __future__ import annotations

from workflows.agents.clarify import CLARIFY
from workflows.agents.demo import DemoAgent
from workflows.agents.files import FILES
from workflows.agents.transfer import TRANSFER
from workflows.runtime import Agent

AGENTS: dict[str, Agent] = {agent.name: agent for agent in (DemoAgent(), FILES, TRANSFER, CLARIFY)}
