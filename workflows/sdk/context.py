"""What agent code (hooks, policies, custom turns) works with: :class:`AgentContext`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, overload

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Interrupt, Message, RunAgentInput
    from pydantic import TypeAdapter, ValidationError
    from temporalio.exceptions import ApplicationError

    from activities.tooling import json_schema
    from workflows.errors import ErrorCode
    from workflows.models import Answer, AnswerStatus
    from workflows.runtime import InterruptRequest, RunContext, word_deltas
    from workflows.sdk.journal import Scope, Suspend

T = TypeVar("T")


@dataclass(frozen=True)
class Ask(Generic[T]):
    """One question for a person: an interrupt as agent code asks for it.

    Args:
        reason: ``tool_call``, ``input_required``, ``confirmation`` or ``<framework>:<name>``.
        message: What the person is asked.
        response: The answer's shape: a type (a pydantic model, ``bool``, a ``Literal``…),
            whose schema the client gets and whose value the agent gets back, or a JSON
            Schema (the agent gets the payload as sent). ``None``: anything.
        expires: A duration from now, or a moment; after it the answer is ``expired``.
        metadata: Passed to the client with the interrupt.
        tool_call_id: The tool call the question is about.
        remind_before: Reminders before ``expires``; the agent's by default.
    """

    reason: str
    message: str | None = None
    response: Any = None
    """``type[T]``, a JSON Schema or ``None`` (typing cannot name ``Literal[...]`` as a
    ``type[T]``, hence ``Any``)."""
    expires: timedelta | datetime | None = None
    metadata: dict[str, Any] | None = None
    tool_call_id: str | None = None
    remind_before: list[timedelta] | None = None

    def request(self, now: datetime) -> InterruptRequest:
        expires_at = now + self.expires if isinstance(self.expires, timedelta) else self.expires
        return InterruptRequest(
            reason=self.reason,
            message=self.message,
            tool_call_id=self.tool_call_id,
            response_schema=json_schema(self.response),
            expires_at=expires_at,
            metadata=self.metadata,
            remind_before=self.remind_before,
        )

    def reply(self, answer: Answer) -> Reply[T]:
        """The answer as agent code receives it: the payload validated as ``response``."""
        value: Any = answer.payload
        if answer.resolved and not isinstance(self.response, dict | None):
            try:
                value = TypeAdapter(self.response).validate_python(answer.payload)
            except ValidationError as error:
                # The client's payload passed the interrupt's JSON Schema, so the
                # schema and the type disagree: a bug in the agent, reported as such.
                raise ApplicationError(
                    f"The answer to {answer.interrupt.id} does not fit {self.response}: {error}",
                    type=ErrorCode.AGENT_FAILED.value,
                    non_retryable=True,
                ) from error
        return Reply(answer.interrupt, answer.status, value if answer.resolved else None)


@dataclass(frozen=True)
class Reply(Generic[T]):
    """A person's answer to an :class:`Ask`."""

    interrupt: Interrupt
    status: AnswerStatus
    """``resolved``, ``cancelled``, or ``expired`` (nobody answered in time)."""
    value: T | None
    """The answer, of the ask's ``response`` type; ``None`` unless ``resolved``."""

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"


class AgentContext:
    """One agent turn, as the agent's code sees it.

    Everything that has an effect (asking, saying, running a model or a tool) goes
    through here, so that when a paused turn runs again after its answers arrive, none
    of it happens twice. Code of a turn between two of these calls runs again on
    resume; keep direct writes to ``state`` or ``memory`` after the turn's interrupts,
    or make them idempotent (``memory["trusted"] = True``, not ``+= 1``).
    """

    def __init__(self, run: RunContext, scope: Scope) -> None:
        self.run = run
        self.scope = scope

    @property
    def input(self) -> RunAgentInput:
        """The input of the run this turn (re)started in."""
        return self.run.input

    @property
    def messages(self) -> Sequence[Message]:
        return self.run.messages

    @property
    def state(self) -> dict[str, Any]:
        """The thread's shared state, which the client sees in ``STATE_SNAPSHOT``."""
        return self.run.state

    @property
    def memory(self) -> dict[str, Any]:
        """What the agent remembers for this thread (remembered decisions), not shared."""
        return self.run.memory

    def now(self) -> datetime:
        return self.run.now()

    def latest_user_text(self) -> str:
        return self.run.latest_user_text()

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
    ) -> Reply[Any]:
        """Ask a person and return the answer, however long it takes (see :class:`Ask`)."""
        ask: Ask[Any] = Ask(reason, message, response, expires, metadata, tool_call_id)
        [reply] = await self.interrupt_all([ask])
        return reply

    async def interrupt_all(self, asks: Sequence[Ask[Any]]) -> list[Reply[Any]]:
        """Ask several questions at once; their answers, in the same order."""
        step = self.scope.recorded("interrupts")
        if step is None:
            now = self.now()
            interrupts = self.run.interrupt([ask.request(now) for ask in asks])
            self.scope.record("interrupts", interrupt_ids=[i.id for i in interrupts])
            raise Suspend
        if step.answers is None:
            raise Suspend
        return [ask.reply(answer) for ask, answer in zip(asks, step.answers, strict=True)]

    def say(self, text: str) -> None:
        """Send an assistant message (streamed word by word) and add it to the thread."""
        if self.scope.recorded("say") is None:
            self.run.say(word_deltas(text))
            self.scope.record("say")

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
        if self.scope.recorded("gather") is None:
            self.scope.record("gather")

        scopes = {key: self.scope.child(key) for key, _ in work}

        async def one(key: str, function: Callable[[AgentContext], Awaitable[T]]) -> T:
            scope = scopes[key]
            finished = scope.finished()
            if finished is not None:
                result: T = finished.value
                return result
            value = await function(AgentContext(self.run, scope))
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
