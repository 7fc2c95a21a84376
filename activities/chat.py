"""Chat models: one small interface, called as an activity.

A model gets the conversation and the tools it may call, and answers with text, tool
calls, or both. :class:`ScriptedModel` is a deterministic one (a plain function of the
conversation) for examples and tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from ag_ui.core import AssistantMessage, Message, TextPart, ToolMessage, UserMessage
from ag_ui.core import Tool as ToolSpec
from pydantic import Field
from temporalio import activity
from temporalio.common import RetryPolicy
from temporalio.service import RPCError

from workflows.models import STREAM_SIGNAL, Model, ModelDelta, ToolCallDelta


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
    def name(self) -> str:
        """Names its activity (``model:<name>``): unique among a worker's models."""
        ...

    @property
    def activity(self) -> Callable[[ChatRequest], Awaitable[ChatReply]]: ...

    @property
    def timeout(self) -> timedelta: ...

    @property
    def heartbeat(self) -> timedelta | None:
        """The activity's heartbeat timeout (``activities.heartbeats``): a call whose
        worker died is retried after it, not after the whole ``timeout``; ``None``,
        none."""
        ...

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
    heartbeat: None = field(default=None, init=False)
    """None: a script answers at once."""

    def __post_init__(self) -> None:
        script = self.script

        async def complete(request: ChatRequest) -> ChatReply:
            return script(request)

        object.__setattr__(self, "activity", activity.defn(name=f"model:{self.name}")(complete))


def last_user_text(messages: Sequence[Message]) -> str:
    """The newest user message's text ("" when there is none), for scripts and turns."""
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return message.content
            return " ".join(part.text for part in message.content if isinstance(part, TextPart))
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


SIGNAL_INTERVAL_SECONDS = 0.05
"""The least time between two of a model activity's ``model_stream`` signals, but for
its last. Each signal is a workflow task of the thread: a model writing 50 tokens a
second cost it 50 tasks a second, and costs it 20, its tokens waiting half an interval
for their signal on average (``docs/bench.md``, "Fewer, larger signals")."""


class DeltaSender:
    """Streams a model activity's output to its thread workflow as it is generated.

    The first piece goes out at once. Each later signal goes once the one before it has
    been delivered and ``SIGNAL_INTERVAL_SECONDS`` after it was sent, holding every
    piece that arrived meanwhile; :meth:`close` sends what is left without waiting. So
    the first token is never held back, and a fast model costs a signal per interval,
    not one per token.
    """

    def __init__(self) -> None:
        info = activity.info()
        self._workflow = activity.client().get_workflow_handle(
            info.workflow_id or "", run_id=info.workflow_run_id
        )
        self._pending = ModelDelta(activity_id=info.activity_id, attempt=info.attempt)
        self._sending: asyncio.Task[None] | None = None
        self._sent_at = -math.inf
        """When the last signal was sent (the event loop's clock)."""
        self._closing = asyncio.Event()
        self._broken = False

    def text(self, delta: str) -> None:
        self._pending.text += delta
        self._send()

    def tool_call(self, index: int, name: str | None, arguments: str) -> None:
        calls = self._pending.tool_calls
        if calls and calls[-1].index == index and name is None:
            calls[-1].arguments += arguments
        else:
            calls.append(ToolCallDelta(index=index, name=name, arguments=arguments))
        self._send()

    async def close(self) -> None:
        """Deliver what is still pending; the activity returns only after this."""
        self._closing.set()
        while self._sending is not None:
            await self._sending

    def _send(self) -> None:
        if self._sending is None:
            self._sending = asyncio.create_task(self._deliver())

    async def _deliver(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._broken and (self._pending.text or self._pending.tool_calls):
                wait = self._sent_at + SIGNAL_INTERVAL_SECONDS - loop.time()
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait):
                            await self._closing.wait()
                batch = self._pending
                self._pending = ModelDelta(activity_id=batch.activity_id, attempt=batch.attempt)
                self._sent_at = loop.time()
                await self._workflow.signal(STREAM_SIGNAL, batch)
        except RPCError as error:
            # Streaming is a preview: the reply itself is the activity's result, and the
            # workflow sends whatever of it the client has not seen.
            activity.logger.warning("model output no longer streamed: %s", error)
            self._broken = True
        finally:
            self._sending = None
