"""Chat models: one small interface, called as an activity.

A model gets the conversation and the tools it may call, and answers with text, tool
calls, or both. :class:`ScriptedModel` is a deterministic one (a plain function of the
conversation) for examples and tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from ag_ui.core import AssistantMessage, Message, ToolMessage, UserMessage
from ag_ui.core import Tool as ToolSpec
from pydantic import Field
from temporalio import activity
from temporalio.common import RetryPolicy

from workflows.models import Model


class ProposedCall(Model):
    """A tool call as a model asks for it."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatRequest(Model):
    """What a model sees: the agent it serves, the conversation, the tools it may call."""

    agent: str
    messages: list[Message]
    tools: list[ToolSpec]


class ChatReply(Model):
    """A model's answer: text for the user, tool calls to run (then it is asked again)."""

    text: str | None = None
    tool_calls: list[ProposedCall] = Field(default_factory=list)


class ChatModel(Protocol):
    """A model the SDK can call: the activity that calls it, and how patiently."""

    @property
    def activity(self) -> Callable[[ChatRequest], Awaitable[ChatReply]]: ...

    @property
    def timeout(self) -> timedelta: ...

    @property
    def retry(self) -> RetryPolicy: ...


@dataclass(frozen=True)
class ScriptedModel:
    """A deterministic model: ``script`` answers the conversation, as the activity
    ``model:<name>`` (so it is called, retried and recorded like a real one).

    Args:
        name: Names the activity; unique among the worker's models.
        script: The conversation (with the tools offered) to the reply.
    """

    name: str
    script: Callable[[ChatRequest], ChatReply]
    timeout: timedelta = timedelta(seconds=30)
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(maximum_attempts=5))
    activity: Callable[[ChatRequest], Awaitable[ChatReply]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        script = self.script

        async def complete(request: ChatRequest) -> ChatReply:
            return script(request)

        object.__setattr__(self, "activity", activity.defn(name=f"model:{self.name}")(complete))


def last_user_text(messages: Sequence[Message]) -> str:
    """The newest user message's text ("" when there is none), for scripts."""
    for message in reversed(messages):
        if isinstance(message, UserMessage) and isinstance(message.content, str):
            return message.content
    return ""


def tool_results(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """``(tool name, result)`` of the tool calls since the newest user message, oldest
    first, for scripts."""
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            break
        if isinstance(message, ToolMessage) and isinstance(message.content, str):
            results.insert(0, (message.tool_call_id, message.content))
        if isinstance(message, AssistantMessage):
            names.update((call.id, call.function.name) for call in message.tool_calls or [])
    return [(names.get(call_id, ""), content) for call_id, content in results]
