"""An agent as a definition: a model, tools (with their approvals) and hooks; the SDK
runs the loop.

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
    from pydantic import BaseModel
    from temporalio.exceptions import ApplicationError

    from activities.chat import ChatModel
    from activities.tooling import Tool
    from workflows.approvers import Approvers, BoundCall
    from workflows.client_input import DEFAULT_ROLES, ClientInput, ClientRole
    from workflows.errors import ErrorCode
    from workflows.models import Answer
    from workflows.sdk.context import AgentContext
    from workflows.sdk.journal import Scope, Suspend, answer
    from workflows.sdk.subagents import SubagentTool
    from workflows.sdk.tools import InterruptTool, ToolCallView
    from workflows.turn import Turn

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
        model: What decides the turn (``activities.chat``); a custom ``turn`` that asks
            no model (a graph) needs none.
        tools: What the model may call: activities (``@tool``, which also declares a
            tool's approval and its own hooks), interrupt-only tools and other agents
            (``subagent_tool``).
        before_tool: Hooks before each call of any tool, all run, in this order, before
            the tool's own.
        before_batch: Hooks before the calls of a model turn run, all run, in order.
        after_tool: Hooks after a call of any tool ran, after the tool's own.
        remind_before: Reminders before interrupts' deadlines (by webhook).
        max_model_calls: A turn that calls the model more often fails (a looping model).
        turn: See below.
        state: The ``state`` a client may send, which is merged key by key into the
            thread's state: a pydantic model or a JSON Schema of the object a run sends.
            ``None``: any JSON object. A client sends back the state it was shown, so
            the keys the agent writes belong in it too.
        forwarded_props: The ``forwardedProps`` a client may send, likewise; ``None``:
            anything. Agent code reads them (``ctx.input.forwarded_props``) knowing
            they fit.
        client_roles: The roles of the messages a client may add to the thread: by
            default what AG-UI gives a client, ``user`` messages and ``tool`` results
            of the tools it provides itself (``RunAgentInput.tools``). A ``tool``
            message answers an unanswered call of such a tool, whatever the roles.
            A run breaking any of these is rejected before it changes anything.
    """

    name: str
    description: str
    model: ChatModel | None = None
    tools: Sequence[Tool | InterruptTool | SubagentTool] = ()
    before_tool: Sequence[BeforeTool] = ()
    before_batch: Sequence[BeforeBatch] = ()
    after_tool: Sequence[AfterTool] = ()
    remind_before: Sequence[timedelta] = ()
    max_model_calls: int = 10
    turn: Callable[[AgentContext], Awaitable[None]] = model_loop
    """The turn's logic; by default the model loop. A custom turn uses the context's
    steps (``model``, ``propose``, ``run_tools``, ``call_tool``, ``interrupt_all``, ``say``)."""
    delegates_to: Sequence[AgentDefinition] = ()
    """The agents a custom turn hands work to (``ctx.delegate``), which the worker then
    runs as sub-agents; a sub-agent tool's agent and a graph's need no mention here."""
    state: type[BaseModel] | dict[str, Any] | None = None
    forwarded_props: type[BaseModel] | dict[str, Any] | None = None
    client_roles: frozenset[ClientRole] = DEFAULT_ROLES
    accepts: ClientInput = field(init=False, repr=False, compare=False)
    """``state``, ``forwarded_props`` and ``client_roles`` compiled, once."""

    def __post_init__(self) -> None:
        """Refuse two tools of one name: the model could not tell which it calls, and
        one's approval would silently stand for the other's. Refuse a declaration of
        client input that is no schema, or names no role."""
        names = [tool.name for tool in self.tools]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"Agent {self.name!r} has several tools named {repeated}.")
        if self.model is None and self.turn is model_loop:
            raise ValueError(f"Agent {self.name!r} has no model for its model loop.")
        accepts = ClientInput.declared(self.state, self.forwarded_props, self.client_roles)
        # A frozen dataclass sets its derived fields this way.
        object.__setattr__(self, "accepts", accepts)

    def capabilities(self) -> AgentCapabilities:
        """Its tools, and which human-in-the-loop features its definition uses."""
        approvals = [t.approval for t in self.tools if isinstance(t, Tool) and t.approval]
        hooks = any(isinstance(t, Tool) and t.before for t in self.tools)
        return AgentCapabilities(
            identity=IdentityCapabilities(name=self.name, description=self.description),
            state=StateCapabilities(snapshots=True, persistent_state=True),
            tools=ToolsCapabilities(
                supported=True, items=[tool.spec for tool in self.tools], parallel_calls=True
            ),
            human_in_the_loop=HumanInTheLoopCapabilities(
                supported=True,
                approvals=bool(approvals or hooks or self.before_tool or self.before_batch),
                interrupts=True,
                approve_with_edits=any(approval.edits for approval in approvals),
            ),
            # AG-UI has no field for what a client may send; custom is its place for
            # what the standard categories do not cover.
            custom={"clientInput": self.accepts.advertised()},
        )

    def activities(self) -> list[Callable[..., Any]]:
        """The model's and the tools' activities."""
        tools = [tool.activity for tool in self.tools if isinstance(tool, Tool)]
        models = [self.model.activity] if self.model is not None else []
        return [*models, *tools]

    def subagents(self) -> list[AgentDefinition]:
        """The agents it hands work to: its sub-agent tools', its turn's (a graph's) and
        those it names (``delegates_to``)."""
        tools = [tool.agent for tool in self.tools if isinstance(tool, SubagentTool)]
        return [*tools, *getattr(self.turn, "subagents", ()), *self.delegates_to]

    async def run(self, turn: Turn) -> None:
        """A new turn: whatever an earlier turn left (it failed) is forgotten."""
        turn.thread.journal.scopes.clear()
        await self._take(turn)

    async def resume(self, turn: Turn, answers: list[Answer]) -> None:
        """The paused turn again, from the top, with the answers it waited for."""
        answer(turn.thread.journal, {a.interrupt.id: a for a in answers})
        await self._take(turn)

    async def _take(self, turn: Turn) -> None:
        journal = turn.thread.journal
        ctx = AgentContext(turn, Scope(journal, "turn"), self)
        try:
            await self.turn(ctx)
        except Suspend:
            return
        journal.scopes.clear()

    def tool(self, name: str) -> Tool | InterruptTool | SubagentTool | None:
        """The tool the model calls ``name``."""
        return next((tool for tool in self.tools if tool.name == name), None)

    def approvers_for(self, call: BoundCall, arguments: dict[str, Any]) -> Approvers | None:
        """The policy an approval of ``call`` would follow with ``arguments`` instead of
        its own (an ``editedArgs``): what the thread checks an edit against."""
        agent: AgentDefinition | None = self
        if call.agent not in (None, self.name):
            agent = next((a for a in self.subagents() if a.name == call.agent), None)
        tool = agent.tool(call.name) if agent is not None else None
        if isinstance(tool, Tool) and tool.approval is not None:
            return tool.approval.approvers_for(arguments)
        return None
