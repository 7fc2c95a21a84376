"""A model behind any OpenAI-compatible chat-completions server, streamed.

The reply streams back to the thread while the model generates it (``DeltaSender``),
so the client sees ``TEXT_MESSAGE_CONTENT`` and ``TOOL_CALL_ARGS`` deltas at once; the
complete reply is the activity's result, which is what the thread keeps.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ag_ui.core import AssistantMessage, Message, TextPart, ToolMessage
from openai import AsyncOpenAI
from temporalio import activity
from temporalio.common import RetryPolicy

from activities.chat import ChatReply, ChatRequest, DeltaSender, ProposedCall
from activities.heartbeats import heartbeating
from settings import process_settings

_CLIENTS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str | None, str | None], AsyncOpenAI]
] = weakref.WeakKeyDictionary()


def _client(base_url: str | None, api_key: str | None) -> AsyncOpenAI:
    """The client of ``base_url`` with ``api_key`` on the running event loop, made once.

    Making one builds an SSL context from the system's certificates, which cost more CPU
    than the rest of a model call's client side on a short conversation (``docs/bench.md``,
    "A model's turn on a long thread"); and one client keeps its connections to the
    server open from one call to the next.
    """
    clients = _CLIENTS.setdefault(asyncio.get_running_loop(), {})
    client = clients.get((base_url, api_key))
    if client is None:
        # Temporal retries the activity, with backoff and a record of each attempt.
        client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        clients[(base_url, api_key)] = client
    return client


@dataclass(frozen=True)
class OpenAIModel:
    """A chat-completions model, as the activity ``model:<name>``.

    Args:
        name: Names the activity; unique among the worker's models.
        model: The model to ask for; ``AGUI_OPENAI_MODEL`` by default.
        base_url: The server; ``AGUI_OPENAI_BASE_URL`` by default (then OpenAI's).
        api_key: ``AGUI_OPENAI_API_KEY`` by default (then ``OPENAI_API_KEY``).
        system: A system prompt put before the conversation.
        timeout: How long one call may take, its reply streamed whole.
        heartbeat: How soon a call whose worker died is retried: the worker heartbeats
            while the model thinks and writes (``activities.heartbeats``).
    """

    name: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    system: str | None = None
    timeout: timedelta = timedelta(minutes=2)
    heartbeat: timedelta | None = timedelta(seconds=10)
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(maximum_attempts=3))
    activity: Callable[[ChatRequest], Awaitable[ChatReply]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        async def complete(request: ChatRequest) -> ChatReply:
            return await heartbeating(self._complete(request))

        object.__setattr__(self, "activity", activity.defn(name=f"model:{self.name}")(complete))

    async def _complete(self, request: ChatRequest) -> ChatReply:
        """Stream one completion, forwarding its text and tool calls as they arrive."""
        settings = process_settings()
        client = _client(
            self.base_url or settings.openai_base_url, self.api_key or settings.openai_api_key
        )
        # The conversation and the tools go in ``extra_body``, whose values take
        # precedence over the arguments: ``create`` rewrites its arguments item by item
        # in Python, which on a long conversation cost more CPU than the rest of the
        # activity (``docs/bench.md``, "A model's turn on a long thread"), and their
        # JSON is sent as it is anyway.
        body: dict[str, Any] = {"messages": self._messages(request.messages)}
        if request.tools:
            body["tools"] = [
                {"type": "function", "function": tool.model_dump(exclude_none=True)}
                for tool in request.tools
            ]
        sender = DeltaSender()
        text = ""
        calls: dict[int, dict[str, str]] = {}
        stream = await client.chat.completions.create(
            model=self.model or settings.openai_model, messages=[], stream=True, extra_body=body
        )
        async with stream:
            async for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    text += delta.content
                    sender.text(delta.content)
                for piece in delta.tool_calls or []:
                    call = calls.setdefault(piece.index, {"name": "", "arguments": ""})
                    name = piece.function.name if piece.function else None
                    arguments = (piece.function.arguments if piece.function else None) or ""
                    call["name"] += name or ""
                    call["arguments"] += arguments
                    sender.tool_call(piece.index, name, arguments)
        await sender.close()
        return ChatReply(
            text=text or None,
            tool_calls=[
                ProposedCall(name=call["name"], arguments=json.loads(call["arguments"] or "{}"))
                for _, call in sorted(calls.items())
            ],
        )

    def _messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The conversation in chat-completions form."""
        converted: list[dict[str, Any]] = []
        if self.system:
            converted.append({"role": "system", "content": self.system})
        for message in messages:
            if isinstance(message, AssistantMessage):
                entry: dict[str, Any] = {"role": "assistant", "content": message.content}
                if message.tool_calls:
                    entry["tool_calls"] = [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.function.name,
                                "arguments": call.function.arguments,
                            },
                        }
                        for call in message.tool_calls
                    ]
                converted.append(entry)
            elif isinstance(message, ToolMessage):
                converted.append(
                    {
                        "role": "tool",
                        "tool_call_id": message.tool_call_id,
                        "content": message.content,
                    }
                )
            elif message.role in ("user", "system", "developer"):
                role = "system" if message.role == "developer" else message.role
                content = message.content
                if not isinstance(content, str):
                    content = " ".join(part.text for part in content if isinstance(part, TextPart))
                converted.append({"role": role, "content": content})
        return converted
