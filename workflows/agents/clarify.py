"""The ``clarify`` agent: books things, asking for a time when none is named.

``ask_user`` is an interrupt-only tool: the model calls it like any tool, the call
becomes an ``input_required`` interrupt, and the chosen option is the tool's result.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import clarify
    from workflows.sdk import AgentDefinition, Ask, interrupt_tool


@interrupt_tool
def ask_user(question: str, options: list[str]) -> Ask[str]:
    """Ask the user to pick one of ``options``."""
    return Ask("input_required", message=question, response={"type": "string", "enum": options})


CLARIFY = AgentDefinition(
    name="clarify",
    description='Books things ("book a table"), asking for a time if you name none.',
    model=clarify.MODEL,
    tools=[ask_user],
)
