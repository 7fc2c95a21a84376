"""Token latency: from a token leaving a model server to the SSE client.

An agent on ``OpenAIModel`` streams replies from the local chat-completions server of
the tests (``tests/chat_server.py``), which emits one token every ``interval`` like a
model generating, and records when each left. The client stamps each
``TEXT_MESSAGE_CONTENT`` as it arrives; a token's delay is its arrival minus its
departure (both on this machine's clock). The path: server -> model activity ->
``model_stream`` signal -> the run's events -> the gateway's query poll -> SSE.
"""

from __future__ import annotations

import json
import time
from uuid import uuid4

import httpx

from activities.openai_chat import OpenAIModel
from bench.stats import Summary
from tests.chat_server import ChatServer, Reply
from workflows.sdk.agent import AgentDefinition

AGENT = "bench-llm"
TOKEN_INTERVAL_SECONDS = 0.02
"""50 tokens per second: a brisk hosted model."""


def token_agent(server: ChatServer) -> AgentDefinition:
    """The bench agent, streaming from ``server``; the engine's worker and gateway are
    handed it beside the examples."""
    return AgentDefinition(
        name=AGENT,
        description="Streams from the bench's local model server.",
        model=OpenAIModel(name=AGENT, base_url=server.base_url, api_key="bench"),
    )


async def measure_tokens(
    http: httpx.AsyncClient, server: ChatServer, replies: int, tokens: int
) -> Summary:
    """Stream ``replies`` replies of ``tokens`` tokens each; every token's delay."""
    delays: list[float] = []
    started = time.perf_counter()
    for _ in range(replies):
        words = [f"t{uuid4().hex[:8]} " for _ in range(tokens)]
        server.sent.clear()
        server.script(Reply(text=words, interval_seconds=TOKEN_INTERVAL_SECONDS))
        arrived: dict[str, float] = {}
        body = {
            "threadId": f"bench-{uuid4()}",
            "runId": "r1",
            "messages": [{"id": "m1", "role": "user", "content": "go"}],
        }
        async with http.stream("POST", f"/agents/{AGENT}", json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line.removeprefix("data: "))
                if event["type"] == "TEXT_MESSAGE_CONTENT":
                    now = time.time()
                    for word in event["delta"].split():
                        arrived.setdefault(f"{word} ", now)
        delays += [arrived[word] - sent for sent, word in server.sent if word in arrived]
    return Summary(tuple(delays), time.perf_counter() - started)
