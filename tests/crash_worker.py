"""``python -m tests.crash_worker``: ``worker.py`` serving what the crash tests need
(``tests/test_crashes.py``) besides the examples.

- The ``ops`` example's deletions are posted to a local endpoint (``OPS_DELETIONS_URL``)
  before they are reported done. The example's inventory is simulated, so nothing in
  its cleanup sub-agent waits on the world; here its ``delete_resources`` calls the
  test's endpoint, as a cloud API call would, with the call's idempotency key. An
  endpoint that holds the request pins the worker mid-way through the cleanup sub-agent
  when a test kills it.
- ``treasurer`` (``tests/treasurer.py``), whose sub-agent run waits on its own question.
- ``chat``, a chat-completions model at ``AGUI_OPENAI_BASE_URL``, as ``OpenAIModel``
  has it by default.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta

from activities.openai_chat import OpenAIModel
from activities.webhooks import post_json
from tests.treasurer import TREASURER
from worker import serve
from workflows.agents import EXAMPLES, ops
from workflows.sdk import AgentDefinition, Graph, tool, tool_context

DELETIONS_URL = "OPS_DELETIONS_URL"
"""The variable that names the endpoint each deletion is posted to."""


@tool(heartbeat=timedelta(seconds=1))
async def delete_resources(names: list[str]) -> dict[str, list[str]]:
    """Delete the resources named (posted to the test's endpoint first)."""
    await post_json(os.environ[DELETIONS_URL], {"names": names}, tool_context().idempotency_key, 10)
    return {"deleted": names}


def _ops() -> AgentDefinition:
    """The ops agent, its cleanup node's agent calling :func:`delete_resources`."""
    graph = ops.OPS.turn
    assert isinstance(graph, Graph)
    cleanup = dataclasses.replace(ops.CLEANUP, tools=[delete_resources])
    nodes = [
        dataclasses.replace(node, agent=cleanup) if node.agent is ops.CLEANUP else node
        for node in graph.nodes
    ]
    return dataclasses.replace(ops.OPS, turn=dataclasses.replace(graph, nodes=nodes))


CHAT = AgentDefinition(
    name="chat",
    description="A chat-completions model, answering in one streamed reply.",
    model=OpenAIModel(name="chat"),
)

AGENTS = (*(_ops() if agent is ops.OPS else agent for agent in EXAMPLES), TREASURER, CHAT)

if __name__ == "__main__":
    serve(AGENTS)
