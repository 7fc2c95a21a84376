"""Sub-agents as tools: the model hands a task to another agent and gets its answer.

A :class:`SubagentTool` is called like any tool, with one argument, ``task``; the agent
behind it works on the task as a sub-agent run of the thread (``AgentContext.delegate``:
a child workflow, its questions asked through the thread), and its final answer is the
call's result. For a fixed orchestration of several agents, see ``workflows/sdk/graph.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Tool as ToolSpec

if TYPE_CHECKING:
    from workflows.sdk.agent import AgentDefinition

TASK_SCHEMA = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the agent is to do, in full."}},
    "required": ["task"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class SubagentTool:
    """A tool whose calls another agent answers (see :func:`subagent_tool`)."""

    name: str
    spec: ToolSpec
    agent: AgentDefinition = field(repr=False)


def subagent_tool(
    agent: AgentDefinition, name: str | None = None, description: str | None = None
) -> SubagentTool:
    """``agent`` as a tool: the model sees ``name`` (the agent's by default) and
    ``description`` (the agent's), and calls it with a ``task``; the agent's answer is
    the result."""
    name = name or agent.name
    spec = ToolSpec(name=name, description=description or agent.description, parameters=TASK_SCHEMA)
    return SubagentTool(name, spec, agent)
