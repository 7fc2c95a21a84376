"""``python -m bench.model_turns [--turns N]``: what a turn of an agent that calls a model
costs early in a thread and late, on the path ``make bench``'s demo agent does not take.

An agent on ``OpenAIModel`` (the local chat-completions server of ``tests/chat_server.py``,
in this process) with one tool that needs approval goes through turns of a question, the
model's call of the tool, its approval, and a reply the model streams after 150 ms of
"thinking" (so the resume's stream reads the run by query while it waits). It reports,
over :data:`WINDOW` turns at the thread's start and at its end, the CPU per turn of the
dev server and of this process (worker, gateway, client and model server), and the
resume's latency. See ``docs/bench.md``, "A model's turn on a long thread".
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any
from uuid import uuid4

import httpx
import uvloop

from activities.openai_chat import OpenAIModel
from bench.cpu import cpu_seconds
from bench.stack import Stack, running_stack
from tests.chat_server import ChatServer, Reply, ScriptedCall
from workflows.sdk import tool
from workflows.sdk.agent import AgentDefinition
from workflows.sdk.tools import Approval

AGENT = "model"
WINDOW = 10
"""Turns each end of the thread is measured over: CPU is read in clock ticks."""
THINKING_SECONDS = 0.15


@tool(approval=Approval())
async def lookup(term: str) -> str:
    """What ``term`` means."""
    return f"{term}: a word"


class Thread:
    """One conversation, as a client that adopts each ``MESSAGES_SNAPSHOT`` keeps it."""

    def __init__(self) -> None:
        self.thread_id = f"bench-{uuid4()}"
        self.messages: list[dict[str, Any]] = []
        self.turns = 0

    async def post(self, http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
        """Post a run, adopt its snapshots; its last event.

        Raises:
            RuntimeError: The run ended with ``RUN_ERROR``.
        """
        last: dict[str, Any] = {}
        async with http.stream("POST", f"/agents/{AGENT}", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    last = json.loads(line.removeprefix("data:"))
                    if last["type"] == "MESSAGES_SNAPSHOT":
                        self.messages = last["messages"]
                    if last["type"] == "RUN_ERROR":
                        raise RuntimeError(f"run {body['runId']} failed: {last}")
        return last

    async def turn(self, http: httpx.AsyncClient, server: ChatServer) -> float:
        """One turn; the resume's latency in seconds.

        Raises:
            RuntimeError: A run failed, or did not pause or succeed.
        """
        server.script(
            Reply(tool_calls=[ScriptedCall("lookup", {"term": "quokka"})]),
            Reply(text=["A quokka ", "is a ", "marsupial."], first_chunk_seconds=THINKING_SECONDS),
        )
        self.turns += 1
        question = {"id": f"u{self.turns}", "role": "user", "content": "What is a quokka?"}
        self.messages = [*self.messages, question]
        first = {"threadId": self.thread_id, "runId": f"r{self.turns}a", "messages": self.messages}
        paused = await self.post(http, first)
        interrupts = (paused.get("outcome") or {}).get("interrupts") or []
        if len(interrupts) != 1:
            raise RuntimeError(f"turn {self.turns} did not pause: {paused}")
        approval = {"approved": True}
        resume = [{"interruptId": interrupts[0]["id"], "status": "resolved", "payload": approval}]
        started = time.perf_counter()
        body = {
            "threadId": self.thread_id,
            "runId": f"r{self.turns}b",
            "messages": self.messages,
            "resume": resume,
        }
        finished = await self.post(http, body)
        if finished.get("outcome") != {"type": "success"}:
            raise RuntimeError(f"turn {self.turns}'s resume did not succeed: {finished}")
        return time.perf_counter() - started


async def window(
    stack: Stack, http: httpx.AsyncClient, server: ChatServer, thread: Thread
) -> tuple[float, float, float]:
    """:data:`WINDOW` turns: the server's and this process's CPU ms per turn, and the
    resume's p50 in ms."""
    server_before, process_before = cpu_seconds(stack.server_pid), time.process_time()
    latencies = [await thread.turn(http, server) for _ in range(WINDOW)]
    server_ms = (cpu_seconds(stack.server_pid) - server_before) * 1000 / WINDOW
    process_ms = (time.process_time() - process_before) * 1000 / WINDOW
    return server_ms, process_ms, statistics.median(latencies) * 1000


async def main() -> None:
    """Parse the flags, drive the thread, print the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.model_turns", description=__doc__)
    parser.add_argument("--turns", type=int, default=100, help="turns (default 100)")
    args = parser.parse_args()
    with ChatServer().serving() as server:
        agent = AgentDefinition(
            name=AGENT,
            description="A model with a gated lookup tool.",
            model=OpenAIModel(name=AGENT, model="bench", base_url=server.base_url, api_key="k"),
            tools=[lookup],
        )
        async with (
            running_stack([agent], None, versioned=True) as stack,
            httpx.AsyncClient(base_url=stack.base_url, headers=stack.headers, timeout=60) as http,
        ):
            thread = Thread()
            await thread.turn(http, server)
            early = await window(stack, http, server, thread)
            while thread.turns < args.turns - WINDOW:
                await thread.turn(http, server)
            late = await window(stack, http, server, thread)
    print(f"A model's turn: {thread.turns} turns, {len(thread.messages)} messages at the end")
    print(f"  {'':<22}{'turns 2-' + str(1 + WINDOW):>12}{f'the last {WINDOW}':>14}{'ratio':>8}")
    rows = ("server CPU ms/turn", "process CPU ms/turn", "resume p50 ms")
    for name, first, last in zip(rows, early, late, strict=True):
        print(f"  {name:<22}{first:>12.1f}{last:>14.1f}{last / first:>7.2f}x")


if __name__ == "__main__":
    uvloop.run(main())
