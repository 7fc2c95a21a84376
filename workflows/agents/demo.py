"""The ``demo`` agent: answers the latest user message through the demo model."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import AgentCapabilities, IdentityCapabilities, StateCapabilities

    from activities.model import GenerateReplyInput, generate_reply
    from workflows.runtime import RunContext


class DemoAgent:
    """A deterministic agent for trying the engine out and for its tests."""

    name = "demo"
    description = "Answers the latest user message; deterministic, for demos and tests."

    def capabilities(self) -> AgentCapabilities:
        """A plain conversational agent with thread state."""
        return AgentCapabilities(
            identity=IdentityCapabilities(name=self.name, description=self.description),
            state=StateCapabilities(snapshots=True, persistent_state=True),
        )

    async def run(self, ctx: RunContext) -> None:
        """Reply to the latest user message."""
        reply = await workflow.execute_activity(
            generate_reply,
            GenerateReplyInput(prompt=ctx.latest_user_text()),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=5),
        )
        ctx.say(reply.chunks)
