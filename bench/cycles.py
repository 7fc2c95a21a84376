"""The interrupt cycle, issue 3's measure: run -> interrupt -> resume -> success.

Each cycle opens a thread with one approval (``mail a@b.com``) and resumes it with an
approval; only the resume is timed, from sending it to reading its ``RUN_FINISHED``:
how long a person waits after clicking "approve". The rate of whole cycles counts each
thread's opening and first run too; :func:`measure_resumes` gives the rate of resumes
alone, on threads paused beforehand.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import httpx

from bench.conversation import AGENT
from bench.stats import Summary


async def _run(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """Post a run and return its terminal event."""
    last: dict[str, Any] = {}
    async with http.stream("POST", f"/agents/{AGENT}", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                last = json.loads(line.removeprefix("data:"))
    return last


async def _pause(http: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    """Open a new thread whose first run pauses on one approval; the thread and the
    resume body that approves it.

    Raises:
        RuntimeError: The thread did not pause.
    """
    thread_id = f"bench-{uuid.uuid4()}"
    message = {"id": "u1", "role": "user", "content": "mail a@b.com"}
    paused = await _run(http, {"threadId": thread_id, "runId": "r1", "messages": [message]})
    outcome = paused.get("outcome") or {}
    if outcome.get("type") != "interrupt":
        raise RuntimeError(f"the run did not pause: {paused}")
    [interrupt] = outcome["interrupts"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    return thread_id, {
        "threadId": thread_id,
        "runId": "r2",
        "messages": [message],
        "resume": [entry],
    }


async def _resume(http: httpx.AsyncClient, body: dict[str, Any]) -> float:
    """Send the resume; its latency in seconds.

    Raises:
        RuntimeError: The resume did not succeed.
    """
    start = time.perf_counter()
    finished = await _run(http, body)
    latency = time.perf_counter() - start
    if finished.get("outcome") != {"type": "success"}:
        raise RuntimeError(f"the resume did not succeed: {finished}")
    return latency


async def _cycle(http: httpx.AsyncClient) -> float:
    """One cycle on a new thread; returns the resume's latency in seconds."""
    _, body = await _pause(http)
    return await _resume(http, body)


async def measure_cycles(http: httpx.AsyncClient, total: int, concurrency: int) -> Summary:
    """``total`` cycles from ``concurrency`` clients; the rate counts whole cycles."""
    latencies: list[float] = []

    async def client(cycles: int) -> None:
        for _ in range(cycles):
            latencies.append(await _cycle(http))

    began = time.perf_counter()
    await asyncio.gather(*(client(total // concurrency) for _ in range(concurrency)))
    return Summary(tuple(latencies), time.perf_counter() - began)


async def measure_resumes(http: httpx.AsyncClient, total: int, concurrency: int) -> Summary:
    """``total`` threads paused first (untimed), then resumed by ``concurrency`` clients;
    the rate counts resumes alone: how fast approvals go through."""
    bodies: list[dict[str, Any]] = []

    async def pause(count: int) -> None:
        for _ in range(count):
            bodies.append((await _pause(http))[1])

    await asyncio.gather(*(pause(total // concurrency) for _ in range(concurrency)))
    latencies: list[float] = []

    async def client(queue: list[dict[str, Any]]) -> None:
        while queue:
            latencies.append(await _resume(http, queue.pop()))

    began = time.perf_counter()
    await asyncio.gather(*(client(bodies) for _ in range(concurrency)))
    return Summary(tuple(latencies), time.perf_counter() - began)
