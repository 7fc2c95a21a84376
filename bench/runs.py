"""Full AG-UI runs through the gateway over real HTTP, and what a thread's history costs.

A run is timed from sending ``POST /agents/demo`` to reading its ``RUN_FINISHED`` from
the SSE stream: what a user waits for, including HTTP, the gateway, update-with-start,
the model activity and the event encoding.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
from temporalio.client import Client

from bench.conversation import AGENT, Conversation
from bench.history import HistoryGrowth, served_runs
from bench.stats import RunTiming, Summary
from workflows.thread_ids import workflow_id_for


async def post_run(http: httpx.AsyncClient, conversation: Conversation) -> RunTiming:
    """Send the thread's next run and read its stream to the end.

    Raises:
        RuntimeError: The run did not finish with ``RUN_FINISHED``: a bench of failing
            runs would measure nothing.
    """
    body = conversation.next_input()
    start = time.perf_counter()
    first: float | None = None
    finished: float | None = None
    async with http.stream("POST", f"/agents/{AGENT}", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"run answered {response.status_code}: {await response.aread()!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            now = time.perf_counter() - start
            first = now if first is None else first
            event = json.loads(line.removeprefix("data:"))
            conversation.adopt(event)
            if event["type"] == "RUN_FINISHED":
                finished = now
            elif event["type"] == "RUN_ERROR":
                raise RuntimeError(f"run failed: {event}")
    if first is None or finished is None:
        raise RuntimeError(f"the stream of {body['runId']} ended without RUN_FINISHED")
    return RunTiming(first, finished)


async def measure_runs(
    http: httpx.AsyncClient, total: int, concurrency: int, runs_per_thread: int
) -> Summary:
    """``total`` runs from ``concurrency`` clients, each on threads of its own.

    Each client runs its threads one after another, ``runs_per_thread`` runs each, so
    concurrent runs never queue behind each other on one thread.
    """
    latencies: list[float] = []

    async def client(runs: int) -> None:
        conversation = Conversation()
        for _ in range(runs):
            if conversation.runs == runs_per_thread:
                conversation = Conversation()
            latencies.append((await post_run(http, conversation)).last)

    began = time.perf_counter()
    await asyncio.gather(*(client(total // concurrency) for _ in range(concurrency)))
    return Summary(tuple(latencies), time.perf_counter() - began)


async def thread_history(client: Client, http: httpx.AsyncClient, runs: int) -> HistoryGrowth:
    """What each of a new thread's first ``runs`` runs cost in the workflow run that
    served it.

    Raises:
        RuntimeError: The thread's history holds another number of runs.
    """
    conversation = Conversation()
    for _ in range(runs):
        await post_run(http, conversation)
    growth = await served_runs(client, workflow_id_for(conversation.thread_id))
    if len(growth.per_run) != runs:
        raise RuntimeError(f"{runs} runs, but {len(growth.per_run)} completed updates")
    return growth
