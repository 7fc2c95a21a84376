"""An agent as a definition: a model, tools, approvals and hooks; the SDK runs the loop.

The loop is the one every framework runs: ask the model; if it calls tools, run them
(concurrently, each behind its approval and hooks), give it the results and ask again;
when it only answers, the turn is done. Any step may pause the turn on interrupts, for
as long as the answers take (``workflows/sdk/journal.py`` says how).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import (
        AgentCapabilities,
        HumanInTheLoopCapabilities,
        IdentityCapabilities,
        StateCapabilities,
        ToolsCapabilities,
    )
    from temporalio.exceptions import ApplicationError

    from activities.chat import ChatModel
    from activities.tooling import Tool
    from workflows.errors import ErrorCode
    from workflows.models import Answer
    from workflows.runtime import RunContext
    from workflows.sdk.context import AgentContext
    from workflows.sdk.journal import Scope, Suspend, answer
    from workflows.sdk.tools import Approval, InterruptTool, ToolCallView

BeforeTool = Callable[[AgentContext, ToolCallView], Awaitable[None]]
"""Runs before a tool call; may ask (``ctx.interrupt``) and may ``call.cancel(...)``."""
BeforeBatch = Callable[[AgentContext, list[ToolCallView]], Awaitable[None]]
"""Runs before the calls of one model turn; one interrupt here can settle them all."""
AfterTool = Callable[[AgentContext, ToolCallView, Any], Awaitable[None]]
"""Runs after a tool call ran, with its result (e.g. to record it in ``ctx.state``)."""


async def model_loop(ctx: AgentContext) -> None:
    """The default turn: the model decides, tools run, until the model only answers."""
    for _ in range(ctx.agent.max_model_calls):
        calls = await ctx.model()
        if not calls:
            return
        await ctx.run_tools(calls)
    raise ApplicationError(
        f"The model asked for tools {ctx.agent.max_model_calls} times in one turn; giving up.",
        type=ErrorCode.AGENT_FAILED.value,
        non_retryable=True,
    )


@dataclass(frozen=True)
class AgentDefinition:
    """An agent the engine serves at ``POST /agents/{name}``.

    Args:
        name: The agent's name in URLs and in ``GET /agents``.
        description: One line for ``GET /agents``.
        model: What decides the turn (``activities.chat``).
        tools: What the model may call: activities (``@tool``) and interrupt-only tools.
        approvals: Tools whose calls need a person's approval, by tool name.
        before_tool: Hooks before each tool call, all run, in this order.
        before_batch: Hooks before the calls of a model turn run, all run, in order.
        after_tool: Hooks after a tool call ran.
        remind_before: Reminders before interrupts' deadlines (by webhook).
        max_model_calls: A turn that calls the model more often fails (a looping model).
        turn: See below.
    """

    name: str
    description: str
    model: ChatModel
    tools: Sequence[Tool | InterruptTool] = ()
    approvals: dict[str, Approval] = field(default_factory=dict)
    before_tool: Sequence[BeforeTool] = ()
    before_batch: Sequence[BeforeBatch] = ()
    after_tool: Sequence[AfterTool] = ()
    remind_before: Sequence[timedelta] = ()
    max_model_calls: int = 10
    turn: Callable[[AgentContext], Awaitable[None]] = model_loop
    """The turn's logic; by default the model loop. A custom turn uses the context's
    steps (``model``, ``propose``, ``run_tools``, ``call_tool``, ``interrupt_all``, ``say``)."""

    def __post_init__(self) -> None:
        """Refuse a definition whose gates could silently fall away: an approval for a
        tool the agent does not have (a typo), or two tools of one name."""
        names = [tool.name for tool in self.tools]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"Agent {self.name!r} has several tools named {repeated}.")
        unknown = sorted(set(self.approvals) - set(names))
        if unknown:
            raise ValueError(
                f"Agent {self.name!r} has approvals for {unknown}, which are not among its "
                f"tools {sorted(names)}."
            )

    def capabilities(self) -> AgentCapabilities:
        """Its tools, and which human-in-the-loop features its definition uses."""
        return AgentCapabilities(
            identity=IdentityCapabilities(name=self.name, description=self.description),
            state=StateCapabilities(snapshots=True, persistent_state=True),
            tools=ToolsCapabilities(
                supported=True, items=[tool.spec for tool in self.tools], parallel_calls=True
            ),
            human_in_the_loop=HumanInTheLoopCapabilities(
                supported=True,
                approvals=bool(self.approvals or self.before_tool or self.before_batch),
                interrupts=True,
                approve_with_edits=any(a.edits for a in self.approvals.values()),
            ),
        )

    def activities(self) -> list[Callable[..., Any]]:
        """The model's and the tools' activities."""
        tools = [tool.activity for tool in self.tools if isinstance(tool, Tool)]
        return [self.model.activity, *tools]

    async def run(self, ctx: RunContext) -> None:
        """A new turn: whatever an earlier turn left (it failed) is forgotten."""
        ctx.journal.scopes.clear()
        await self._turn(ctx)

    async def resume(self, ctx: RunContext, answers: list[Answer]) -> None:
        """The paused turn again, from the top, with the answers it waited for."""
        answer(ctx.journal, {a.interrupt.id: a for a in answers})
        await self._turn(ctx)

    async def _turn(self, run: RunContext) -> None:
        ctx = AgentContext(run, Scope(run.journal, "turn"), self)
        try:
            await self.turn(ctx)
        except Suspend:
            return
        run.journal.scopes.clear()

    def tool(self, name: str) -> Tool | InterruptTool | None:
        """The tool the model calls ``name``."""
        return next((tool for tool in self.tools if tool.name == name), None)
