"""An agent as a definition: a model, tools, approvals and hooks; the SDK runs the loop.

The loop is the one every framework runs: ask the model; if it calls tools, run them
(concurrently, each behind its approval and hooks), give it the results and ask again;
when it only answers, the turn is done. Any step may pause the turn on interrupts, for
as long as the answers take (``workflows/sdk/journal.py`` says how).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import partial
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

    from activities.chat import ChatModel, ChatRequest
    from activities.tooling import Tool, ToolInvocation, ToolOutcome
    from workflows.errors import ErrorCode
    from workflows.models import Answer
    from workflows.runtime import RunContext
    from workflows.sdk.context import AgentContext, Ask
    from workflows.sdk.journal import Scope, Suspend, answer
    from workflows.sdk.streaming import LiveReply
    from workflows.sdk.tools import Approval, InterruptTool, ToolCallView

BeforeTool = Callable[[AgentContext, ToolCallView], Awaitable[None]]
"""Runs before a tool call; may ask (``ctx.interrupt``) and may ``call.cancel(...)``."""
BeforeBatch = Callable[[AgentContext, list[ToolCallView]], Awaitable[None]]
"""Runs before the calls of one model turn; one interrupt here can settle them all."""
AfterTool = Callable[[AgentContext, ToolCallView, Any], Awaitable[None]]
"""Runs after a tool call ran, with its result (e.g. to record it in ``ctx.state``)."""


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
        ctx = AgentContext(run, Scope(run.journal, "turn"))
        try:
            await self._loop(ctx)
        except Suspend:
            return
        run.journal.scopes.clear()

    async def _loop(self, ctx: AgentContext) -> None:
        for _ in range(self.max_model_calls):
            calls = await self._call_model(ctx)
            if not calls:
                return
            for hook in self.before_batch:
                await hook(ctx, calls)
            await ctx.gather([(call.id, self._tool_call(call)) for call in calls])
        raise ApplicationError(
            f"The model asked for tools {self.max_model_calls} times in one turn; giving up.",
            type=ErrorCode.AGENT_FAILED.value,
            non_retryable=True,
        )

    async def _call_model(self, ctx: AgentContext) -> list[ToolCallView]:
        """Ask the model; its text and tool calls reach the client as it generates them."""
        step = ctx.scope.recorded("model")
        if step is None:
            activity_id = f"model-{workflow.uuid4()}"
            live = LiveReply(ctx.run)
            ctx.run.listeners[activity_id] = live.on_delta
            try:
                reply = await workflow.execute_activity(
                    self.model.activity,
                    ChatRequest(
                        agent=self.name,
                        messages=list(ctx.messages),
                        tools=[tool.spec for tool in self.tools],
                    ),
                    activity_id=activity_id,
                    start_to_close_timeout=self.model.timeout,
                    retry_policy=self.model.retry,
                    summary="model",
                )
            finally:
                del ctx.run.listeners[activity_id]
            calls: list[dict[str, Any]] = [
                {"id": made.id, "name": asked.name, "arguments": asked.arguments}
                for made, asked in zip(live.finish(reply), reply.tool_calls, strict=True)
            ]
            ctx.scope.record("model", calls)
            return [ToolCallView(**call) for call in calls]
        return [ToolCallView(**call) for call in step.value]

    def _tool_call(self, call: ToolCallView) -> Callable[[AgentContext], Awaitable[str]]:
        """One call of a batch, in its own scope: approval, hooks, the tool, its result."""

        async def settle(ctx: AgentContext) -> str:
            tool = next((t for t in self.tools if t.name == call.name), None)
            if tool is None:
                call.cancel(f"There is no tool named {call.name!r}.")
            else:
                approval = self.approvals.get(call.name)
                if approval is not None and approval.applies(call):
                    await _approve(ctx, call, approval.ask(call, tool.spec))
            for hook in self.before_tool:
                await hook(ctx, call)
            content = call.cancelled
            if content is None:
                assert tool is not None
                result = await self._execute(ctx, tool, call)
                for after in self.after_tool:
                    await after(ctx, call, result)
                content = result if isinstance(result, str) else json.dumps(result)
            if ctx.scope.recorded("result") is None:
                ctx.run.tool_result(ctx.run.tool_call(call.id), content)
                ctx.scope.record("result")
            return content

        return settle

    async def _execute(
        self, ctx: AgentContext, tool: Tool | InterruptTool, call: ToolCallView
    ) -> Any:
        """Run the tool; when it asks (``ToolInterrupt``), ask, then respond or restart."""
        if isinstance(tool, InterruptTool):
            ask = tool.ask(**dict(tool.arguments.model_validate(call.arguments)))
            [answered] = await ctx.interrupt_all([_bound(ask, call)])
            return answered.value if answered.resolved else _unanswered(answered.status)
        resumed = None
        while True:
            outcome = ToolOutcome.model_validate(
                await ctx.scope.step("tool", partial(self._invoke, ctx, tool, call, resumed))
            )
            if outcome.error is not None:
                return {"error": outcome.error}
            if outcome.interrupt is None:
                return outcome.result
            asked = outcome.interrupt
            reply = await ctx.interrupt(
                asked.reason,
                message=asked.message,
                response=asked.response_schema,
                metadata=asked.metadata,
                tool_call_id=call.id,
            )
            if not reply.resolved:
                return _unanswered(reply.status)
            if asked.respond:
                return reply.value
            resumed = reply.value

    async def _invoke(
        self, ctx: AgentContext, tool: Tool, call: ToolCallView, resumed: Any
    ) -> dict[str, Any]:
        outcome = await workflow.execute_activity(
            tool.activity,
            ToolInvocation(
                tool_call_id=call.id,
                thread_id=ctx.input.thread_id,
                arguments=call.arguments,
                resumed=resumed,
            ),
            start_to_close_timeout=tool.timeout,
            retry_policy=tool.retry,
            summary=tool.name,
        )
        return outcome.model_dump(mode="json", by_alias=True)


async def _approve(ctx: AgentContext, call: ToolCallView, ask: Ask[dict[str, Any]]) -> None:
    """Wait for the approval; a denial cancels the call, edits replace its arguments."""
    [reply] = await ctx.interrupt_all([ask])
    decision = reply.value or {}
    if not reply.resolved:
        call.cancel(_unanswered(reply.status))
    elif not decision.get("approved"):
        call.cancel("Not run: the user denied it.")
    elif "editedArgs" in decision:
        call.arguments = decision["editedArgs"]


def _bound(ask: Ask[Any], call: ToolCallView) -> Ask[Any]:
    """``ask`` bound to the call it is about."""
    return replace(ask, tool_call_id=call.id)


def _unanswered(status: str) -> str:
    return f"Not run: the question was {status}."
