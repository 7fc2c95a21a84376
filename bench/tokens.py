"""Token latency: from a token leaving a model server to the SSE client.

An agent on ``OpenAIModel`` streams replies from the local chat-completions server of
the tests (``tests/chat_server.py``), which emits one token every ``interval`` like a
model generating, and records when each left. The client stamps each
``TEXT_MESSAGE_CONTENT`` as it arrives; a token's delay is its arrival minus its
departure (both on this machine's clock). The path: server -> model activity ->
``model_stream`` signal -> the run's events -> the gateway's query -> SSE.

Replies come at once, or after the model thinks a while before its first token, as
hosted models do: the gateway's reads while a stream waits are counted as well.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from uuid import uuid4

import httpx

from activities.openai_chat import OpenAIModel
from bench.reads import ReadCount, StreamCost
from bench.server_work import ServerWork, settled_work
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


@dataclass(frozen=True)
class Tokens:
    """What streaming replies took: each token's delay, and the gateway's reads."""

    delays: Summary
    first: Summary
    """The delay of each reply's first token."""
    cost: StreamCost
    work: ServerWork
    """What the dev server did per reply: each ``model_stream`` signal is a workflow
    task of the thread (``activities.chat.DeltaSender``)."""


async def measure_tokens(
    http: httpx.AsyncClient,
    server: ChatServer,
    reads: ReadCount,
    metrics_url: str,
    replies: int,
    tokens: int,
    thinking_seconds: float = 0.0,
) -> Tokens:
    """Stream ``replies`` replies of ``tokens`` tokens each, the first token of each
    ``thinking_seconds`` after the model was called; the gateway's reads are counted
    in ``reads``, the server's work read from ``metrics_url``."""
    delays: list[float] = []
    first: list[float] = []
    streaming = 0.0
    work = await settled_work(metrics_url)
    before = reads.reads
    started = time.perf_counter()
    for _ in range(replies):
        words = [f"t{uuid4().hex[:8]} " for _ in range(tokens)]
        server.sent.clear()
        server.script(
            Reply(
                text=words,
                interval_seconds=TOKEN_INTERVAL_SECONDS,
                first_chunk_seconds=thinking_seconds,
            )
        )
        arrived: dict[str, float] = {}
        opened = time.perf_counter()
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
        streaming += time.perf_counter() - opened
        reply = [arrived[word] - sent for sent, word in server.sent if word in arrived]
        delays += reply
        first += reply[:1]
    elapsed = time.perf_counter() - started
    return Tokens(
        Summary(tuple(delays), elapsed),
        Summary(tuple(first), elapsed),
        StreamCost(reads.reads - before, streaming),
        (await settled_work(metrics_url) - work).per(replies),
    )
