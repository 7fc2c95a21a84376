"""What agent code (hooks, tools' approvals, custom turns) works with: :class:`AgentContext`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, overload

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Message, RunAgentInput, ToolCall, ToolCallResultEvent, ToolMessage
    from pydantic import ValidationError
    from temporalio.exceptions import ApplicationError

    from activities.chat import ChatRequest, ProposedCall, last_user_text
    from activities.tooling import Tool, ToolInvocation, ToolOutcome
    from workflows.approvers import Approvers
    from workflows.errors import ErrorCode
    from workflows.models import Answer
    from workflows.questions import Ask, Question, Reply
    from workflows.sdk.journal import Scope, Suspend
    from workflows.sdk.replies import AssistantReply
    from workflows.sdk.subagents import SubagentTool
    from workflows.sdk.tools import InterruptTool, ToolCallView, unanswered
    from workflows.turn import Turn

if TYPE_CHECKING:
    from workflows.sdk.agent import AgentDefinition

T = TypeVar("T")


class AgentContext:
    """One agent turn, as the agent's code sees it.

    Everything that has an effect (asking, saying, running a model or a tool) goes
    through here, so that when a paused turn runs again after its answers arrive, none
    of it happens twice. Code of a turn between two of these calls runs again on
    resume; keep direct writes to ``state`` or ``memory`` after the turn's interrupts,
    or make them idempotent (``memory["trusted"] = True``, not ``+= 1``).
    """

    def __init__(
        self,
        turn: Turn,
        scope: Scope,
        agent: AgentDefinition,
        subagent_run_id: str | None = None,
    ) -> None:
        self.turn = turn
        self.scope = scope
        self.agent = agent
        self.subagent_run_id = subagent_run_id
        """The sub-agent run its questions are about (a graph's before-node hook's):
        their interrupts carry its ``subagentRunId``."""

    @property
    def input(self) -> RunAgentInput:
        """The input of the run this turn (re)started in."""
        return self.turn.input

    @property
    def messages(self) -> Sequence[Message]:
        """The thread's conversation, oldest first."""
        return self.turn.thread.messages

    @property
    def state(self) -> dict[str, Any]:
        """The thread's shared state, which the client sees in ``STATE_SNAPSHOT``."""
        return self.turn.thread.state

    @property
    def memory(self) -> dict[str, Any]:
        """What the agent remembers for this thread (remembered decisions), not shared."""
        return self.turn.thread.memory

    def now(self) -> datetime:
        """The current time, as workflow code must read it."""
        return workflow.now()

    def latest_user_text(self) -> str:
        """The text of the newest user message ("" when there is none)."""
        return last_user_text(self.messages)

    @overload
    async def interrupt(
        self,
        reason: str,
        *,
        message: str | None = None,
        response: type[T],
        expires: timedelta | datetime | None = None,
        metadata: dict[str, Any] | None = None,
        tool_call_id: str | None = None,
        remind_before: list[timedelta] | None = None,
        approvers: Approvers | None = None,
    ) -> Reply[T]: ...

    @overload
    async def interrupt(
        self,
        reason: str,
        *,
        message: str | None = None,
        response: Any = None,
        expires: timedelta | datetime | None = None,
        metadata: dict[str, Any] | None = None,
        tool_call_id: str | None = None,
        remind_before: list[timedelta] | None = None,
        approvers: Approvers | None = None,
    ) -> Reply[Any]: ...

    async def interrupt(
        self,
        reason: str,
        *,
        message: str | None = None,
        response: Any = None,
        expires: timedelta | datetime | None = None,
        metadata: dict[str, Any] | None = None,
        tool_call_id: str | None = None,
        remind_before: list[timedelta] | None = None,
        approvers: Approvers | None = None,
    ) -> Reply[Any]:
        """Ask a person and return the answer, however long it takes (see :class:`Ask`;
        ``approvers`` says who may answer, the thread's owner by default)."""
        ask: Ask[Any] = Ask(
            reason,
            message=message,
            response=response,
            expires=expires,
            metadata=metadata,
            tool_call_id=tool_call_id,
            remind_before=remind_before,
            approvers=approvers,
        )
        [reply] = await self.interrupt_all([ask])
        return reply

    async def interrupt_all(self, asks: Sequence[Ask[Any]]) -> list[Reply[Any]]:
        """Ask several questions at once; their answers, in the same order."""
        if not asks:
            return []
        answers = await self._answers(lambda now: [ask.question(now) for ask in asks])
        return [ask.reply(answer) for ask, answer in zip(asks, answers, strict=True)]

    async def _answers(self, questions: Callable[[datetime], list[Question]]) -> list[Answer]:
        """The answers to ``questions`` (made when first asked): the turn pauses until
        every one is in, and runs again from its top with them."""
        step = self.scope.recorded("interrupts")
        if step is None:
            interrupts = self.turn.host.ask(
                questions(self.now()), subagent_run_id=self.subagent_run_id
            )
            self.scope.record("interrupts", interrupt_ids=[i.id for i in interrupts])
            raise Suspend
        if step.answers is None:
            raise Suspend
        return step.answers

    def say(self, text: str) -> None:
        """Send an assistant message (in one delta) and add it to the thread."""

        def send() -> None:
            reply = AssistantReply(self.turn.host)
            reply.text(text)
            reply.finish(text, [])

        self.scope.once("say", send)

    async def gather(
        self, work: Sequence[tuple[str, Callable[[AgentContext], Awaitable[T]]]]
    ) -> list[T]:
        """Run pieces of work concurrently, each in its own scope; their results.

        Args:
            work: ``(key, function)`` pairs; keys are unique among them. Each function
                gets its own context, and must return JSON-serialisable data.

        A piece that paused on an interrupt pauses the whole gather, but only once all
        the others have finished or paused too; on resume the finished ones are not run
        again (their results are recorded), the paused ones run again from their top.
        """
        self.scope.once("gather", lambda: None)

        scopes = {key: self.scope.child(key) for key, _ in work}

        async def one(key: str, function: Callable[[AgentContext], Awaitable[T]]) -> T:
            scope = scopes[key]
            finished = scope.finished()
            if finished is not None:
                result: T = finished.value
                return result
            value = await function(AgentContext(self.turn, scope, self.agent, self.subagent_run_id))
            scope.finish(json.loads(json.dumps(value)))
            return value

        outcomes = await asyncio.gather(*(one(k, f) for k, f in work), return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        for failure in failures:
            if not isinstance(failure, Suspend):
                raise failure
        if failures:
            raise Suspend
        return outcomes  # type: ignore[return-value]

    async def model(self) -> list[ToolCallView]:
        """Ask the agent's model; its text and tool calls reach the client as it
        generates them. Returns the tool calls it asked for (none: it has answered)."""
        model = self.agent.model
        if model is None:
            raise ApplicationError(
                f"Agent {self.agent.name} has no model to ask.",
                type=ErrorCode.AGENT_FAILED.value,
                non_retryable=True,
            )
        step = self.scope.recorded("model")
        if step is None:
            activity_id = f"model-{workflow.uuid4()}"
            live = AssistantReply(self.turn.host)
            self.turn.host.listen(activity_id, live.on_delta)
            try:
                reply = await workflow.execute_activity(
                    model.activity,
                    ChatRequest(
                        agent=self.agent.name,
                        # Its own conversation: sub-agents' messages are theirs.
                        messages=[m for m in self.messages if m.subagent_run_id is None],
                        tools=[tool.spec for tool in self.agent.tools],
                    ),
                    activity_id=activity_id,
                    start_to_close_timeout=model.timeout,
                    heartbeat_timeout=model.heartbeat,
                    retry_policy=model.retry,
                    summary="model",
                )
            finally:
                self.turn.host.listen(activity_id, None)
            message = live.finish(reply.text, [(c.name, c.arguments) for c in reply.tool_calls])
            calls = _views(message.tool_calls or [], reply.tool_calls)
            self.scope.record("model", calls)
        else:
            calls = step.value
        return [ToolCallView(**call) for call in calls]

    def propose(self, calls: Sequence[ProposedCall]) -> list[ToolCallView]:
        """Announce tool calls the turn's own code decided on, as a model's would be."""
        step = self.scope.recorded("propose")
        if step is None:
            announced: list[ToolCall] | None = []
            if calls:
                reply = AssistantReply(self.turn.host)
                announced = reply.finish(None, [(c.name, c.arguments) for c in calls]).tool_calls
            views = _views(announced or [], calls)
            self.scope.record("propose", views)
        else:
            views = step.value
        return [ToolCallView(**view) for view in views]

    async def run_tools(self, calls: list[ToolCallView]) -> list[str]:
        """Run a batch of tool calls concurrently, each behind its approval and the
        agent's hooks; their results (also sent to the client and the conversation)."""
        for hook in self.agent.before_batch:
            await hook(self, calls)
        return await self.gather([(call.id, _settle(call)) for call in calls])

    async def call_tool(self, call: ToolCallView) -> Any:
        """Run one tool call now, without approval or hooks; its result. When the tool
        asks (``ToolInterrupt``), the turn waits for the answer, then the tool's result
        is the answer (*respond*) or the tool runs again with it (*restart*)."""
        tool = self.agent.tool(call.name)
        if tool is None:
            return {"error": f"There is no tool named {call.name!r}."}
        if isinstance(tool, SubagentTool):
            task = call.arguments.get("task")
            if not isinstance(task, str):
                return {"error": f"{tool.name} takes one argument, task, a string."}
            return await self.delegate(tool.agent, task, tool_call_id=call.id)
        if isinstance(tool, InterruptTool):
            try:
                arguments = tool.arguments.model_validate(call.arguments)
            except ValidationError as error:
                return {"error": f"Invalid arguments for {tool.name}: {error}"}
            ask = tool.ask(**dict(arguments))
            [reply] = await self.interrupt_all([replace(ask, tool_call_id=call.id)])
            return reply.value if reply.resolved else unanswered(reply.status)
        resumed = None
        while True:
            outcome = ToolOutcome.model_validate(
                await self.scope.step("tool", lambda: self._invoke(tool, call, resumed))  # noqa: B023 - called at once
            )
            if outcome.error is not None:
                return {"error": outcome.error}
            if outcome.interrupt is None:
                return outcome.result
            question = outcome.interrupt.model_copy(update={"tool_call_id": call.id})
            [answer] = await self._answers(lambda _: [question])  # noqa: B023 - called at once
            if not answer.resolved:
                return unanswered(answer.status)
            if outcome.respond:
                return answer.payload
            resumed = answer.payload

    async def delegate(
        self,
        agent: AgentDefinition,
        task: str,
        *,
        subagent_run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> str:
        """Hand ``task`` to ``agent``, which works on it as a sub-agent run of this
        thread (a child workflow with its own journal); its final answer. The worker
        runs only the sub-agents it knows of: a custom turn names ``agent`` in its
        definition's ``delegates_to``.

        Its text and tool calls reach the client in this run, marked with its
        ``subagentRunId``. Its questions end the run with the thread's other open
        interrupts, and this turn waits for their answers as for its own; the answers
        go to the sub-agent, which goes on from where it paused. A sub-agent that fails
        fails this turn (``AGENT_FAILED``, with its reason).

        Args:
            subagent_run_id: Its id, made beforehand (``turn.host.subagents.new_id``),
                so that questions asked before it starts carry it (a graph's
                before-node hooks); a new one by default.
            tool_call_id: The tool call it answers (a sub-agent tool's).
        """
        host = self.turn.host.subagents
        started = self.scope.recorded("subagent")
        if started is None:
            run_id = subagent_run_id or host.new_id(agent.name)
            self.scope.record("subagent", run_id)
            host.announce(run_id, agent.name, agent.description, tool_call_id)
            await host.start(run_id, agent.name, task)
        else:
            run_id = started.value
        round_ = 0
        while True:
            kind = self.scope.next_kind()
            if kind == "result":
                result: str = self.scope.step_value("result")
                return result
            if kind != "interrupts":
                return await self._subagent_round(agent, run_id, round_)
            asked = self.scope.recorded("interrupts")
            if asked is None or asked.answers is None:
                raise Suspend
            round_ += 1
            if self.scope.recorded("answered") is None:
                host.announce(run_id, agent.name, agent.description, tool_call_id)
                await host.answer(run_id, round_, asked.answers)
                self.scope.record("answered")

    async def _subagent_round(self, agent: AgentDefinition, run_id: str, round_: int) -> str:
        """Stream the sub-agent's round into this run, until it answers or asks."""
        host = self.turn.host.subagents
        self.scope.recorded("result")  # The step this round ends with is recorded next.
        while True:
            report = await host.report(run_id, round_)
            for message in report.messages:
                self.turn.host.add_message(message)
            for event in report.events:
                self.turn.host.emit(event)
            if report.outcome == "succeeded":
                result = report.result or ""
                self.scope.record("result", result)
                host.finish(run_id, result)
                return result
            if report.outcome == "failed":
                code = report.error_code or ErrorCode.AGENT_FAILED
                reason = report.error or "The sub-agent failed."
                host.fail(run_id, code, reason)
                raise ApplicationError(
                    f"Sub-agent {agent.name} failed: {reason}",
                    type=ErrorCode.AGENT_FAILED.value,
                    non_retryable=True,
                )
            if report.outcome == "paused":
                interrupts = self.turn.host.ask(
                    report.questions, subagent_run_id=run_id, ids=report.interrupt_ids
                )
                # It is suspended once the run ends on these (``Delegation.end_run``).
                self.scope.record("interrupts", interrupt_ids=[i.id for i in interrupts])
                raise Suspend

    def tool_result(self, call: ToolCallView, content: str) -> None:
        """Report a call's result (``TOOL_CALL_RESULT``) and add it to the conversation."""
        self.scope.once("result", lambda: self._report(call.id, content))

    def _report(self, tool_call_id: str, content: str) -> None:
        message_id = str(workflow.uuid4())
        self.turn.host.emit(
            ToolCallResultEvent(
                message_id=message_id, tool_call_id=tool_call_id, content=content, role="tool"
            )
        )
        self.turn.host.add_message(
            ToolMessage(id=message_id, tool_call_id=tool_call_id, content=content)
        )

    async def _invoke(self, tool: Tool, call: ToolCallView, resumed: Any) -> dict[str, Any]:
        invocation = ToolInvocation(
            tool_call_id=call.id,
            thread_id=self.input.thread_id,
            arguments=call.arguments,
            resumed=resumed,
            permit=call.permit,
        )
        options: dict[str, Any] = {
            "start_to_close_timeout": tool.timeout,
            "retry_policy": tool.retry,
            "summary": tool.name,
        }
        outcome: ToolOutcome
        if tool.local:
            outcome = await workflow.execute_local_activity(tool.activity, invocation, **options)
        else:
            # Only a worker's activities heartbeat; a local one dies with its workflow task.
            outcome = await workflow.execute_activity(
                tool.activity, invocation, heartbeat_timeout=tool.heartbeat, **options
            )
        return outcome.model_dump(mode="json", by_alias=True)


def _settle(call: ToolCallView) -> Callable[[AgentContext], Awaitable[str]]:
    """One call of a batch, in its own scope: approval, hooks, the tool, its result."""

    async def settle(ctx: AgentContext) -> str:
        agent = ctx.agent
        tool = agent.tool(call.name)
        if tool is None:
            call.cancel(f"There is no tool named {call.name!r}.")
        elif isinstance(tool, Tool) and tool.approval and tool.approval.applies(call):
            [reply] = await ctx.interrupt_all([tool.approval.ask(call, tool.spec)])
            call.apply(reply)
        hooks = [*agent.before_tool, *(tool.before if isinstance(tool, Tool) else ())]
        for hook in hooks:
            if call.cancelled is not None:
                break  # A denied or cancelled call asks nothing further.
            await hook(ctx, call)
        content = call.cancelled
        if content is None:
            result = await ctx.call_tool(call)
            after = [*(tool.after if isinstance(tool, Tool) else ()), *agent.after_tool]
            for hook_after in after:
                await hook_after(ctx, call, result)
            content = call.content(result)
        ctx.tool_result(call, content)
        return content

    return settle


def _views(announced: Sequence[Any], asked: Sequence[ProposedCall]) -> list[dict[str, Any]]:
    """Announced tool calls (with their ids) as recorded: what ``ToolCallView`` takes."""
    return [
        {"id": made.id, "name": call.name, "arguments": call.arguments}
        for made, call in zip(announced, asked, strict=True)
    ]
