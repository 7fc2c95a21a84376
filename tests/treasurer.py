"""``treasurer``: an agent that hands transfers to the ``transfer`` example as a sub-agent
tool, for the tests that need a sub-agent run waiting on its own question.

``transfer``'s tool asks from inside, so its sub-agent run pauses: the thread's run ends
on the question (marked with the run's ``subagentRunId``), and the child workflow
continues as new and waits for the answer. ``tests/crash_worker.py`` serves it to the
crash tests, ``tests/record_histories.py`` to the recorded histories.
"""

from __future__ import annotations

from workflows.agents.transfer import TRANSFER
from workflows.sdk import (
    AgentDefinition,
    ChatReply,
    ChatRequest,
    ProposedCall,
    ScriptedModel,
    last_user_text,
    subagent_tool,
    tool_results,
)


def hand_over(request: ChatRequest) -> ChatReply:
    """Hand the user's request to ``transfer``; answer with what it answered."""
    results = tool_results(request.messages)
    if results:
        return ChatReply(text=f"The transfer agent says: {results[-1][1]}")
    task = {"task": last_user_text(request.messages)}
    return ChatReply(tool_calls=[ProposedCall(name=TRANSFER.name, arguments=task)])


TREASURER = AgentDefinition(
    name="treasurer",
    description="Hands transfers to the transfer agent.",
    model=ScriptedModel("treasurer", hand_over),
    tools=[subagent_tool(TRANSFER)],
)
