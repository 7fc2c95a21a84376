"""The agents this engine serves, by name: the examples, one module each, holding the
agent's tools and model (its activities) with its definition.

The gateway routes ``POST /agents/{name}`` by this registry, the worker runs the
activities of every agent in it, and the thread workflow runs the agent it names, so all
three always agree on which agents exist.
"""

from __future__ import annotations

from workflows.agents.clarify import CLARIFY
from workflows.agents.demo import DEMO
from workflows.agents.files import FILES
from workflows.agents.transfer import TRANSFER
from workflows.sdk import AgentDefinition

AGENTS: dict[str, AgentDefinition] = {
    agent.name: agent for agent in (DEMO, FILES, TRANSFER, CLARIFY)
}
