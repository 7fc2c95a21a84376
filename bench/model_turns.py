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
import statistics
import time

import httpx
import uvloop

from activities.openai_chat import OpenAIModel
from bench.conversation import Conversation
from bench.cpu import cpu_seconds
from bench.growth import turn
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


async def model_turn(
    http: httpx.AsyncClient, server: ChatServer, conversation: Conversation
) -> float:
    """One turn: the model calls the tool, the call is approved, the model replies; the
    resume's latency in seconds.

    Raises:
        RuntimeError: A run did not pause, or the resume did not succeed.
    """
    server.script(
        Reply(tool_calls=[ScriptedCall("lookup", {"term": "quokka"})]),
        Reply(text=["A quokka ", "is a ", "marsupial."], first_chunk_seconds=THINKING_SECONDS),
    )
    cost = await turn(http, conversation, lambda: {}, AGENT, "What is a quokka?")
    return cost.resume_seconds


async def window(
    stack: Stack, http: httpx.AsyncClient, server: ChatServer, conversation: Conversation
) -> tuple[float, float, float]:
    """:data:`WINDOW` turns: the server's and this process's CPU ms per turn, and the
    resume's p50 in ms."""
    server_before, process_before = cpu_seconds(stack.server_pid), time.process_time()
    latencies = [await model_turn(http, server, conversation) for _ in range(WINDOW)]
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
            conversation = Conversation()
            await model_turn(http, server, conversation)
            early = await window(stack, http, server, conversation)
            for _ in range(args.turns - 1 - 2 * WINDOW):
                await model_turn(http, server, conversation)
            late = await window(stack, http, server, conversation)
    turns = conversation.runs // 2
    print(f"A model's turn: {turns} turns, {len(conversation.messages)} messages at the end")
    print(f"  {'':<22}{'turns 2-' + str(1 + WINDOW):>12}{f'the last {WINDOW}':>14}{'ratio':>8}")
    rows = ("server CPU ms/turn", "process CPU ms/turn", "resume p50 ms")
    for name, first, last in zip(rows, early, late, strict=True):
        print(f"  {name:<22}{first:>12.1f}{last:>14.1f}{last / first:>7.2f}x")


if __name__ == "__main__":
    uvloop.run(main())
