"""The interrupt cycle, issue 3's measure: run -> interrupt -> resume -> success.

Each cycle opens a thread with one approval (``mail a@b.com``) and resumes it with an
approval; only the resume is timed, from sending it to reading its ``RUN_FINISHED``:
how long a person waits after clicking "approve". The rate of whole cycles counts each
thread's opening and first run too; :func:`measure_resumes` gives the rate of resumes
alone, on threads paused beforehand. Both read the CPU the stack spent meanwhile, by
process (:mod:`bench.cpu`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from bench.conversation import AGENT
from bench.cpu import CpuSplit, cpu_now
from bench.reads import Reads
from bench.server_work import ServerWork, settled_work
from bench.stack import Stack
from bench.stats import Summary


@dataclass(frozen=True)
class Cycles:
    """Timed operations (cycles or resumes), the CPU the stack spent on all of them, the
    reads the gateway made meanwhile (:mod:`bench.reads`) and the work the Temporal server
    did (:mod:`bench.server_work`)."""

    summary: Summary
    cpu: CpuSplit
    reads: Reads
    work: ServerWork

    @classmethod
    def pooled(cls, batches: Iterable[Cycles]) -> Cycles:
        """Batches taken apart, as one (:meth:`Summary.pooled`), their CPU, reads and the
        server's work added."""
        parts = list(batches)
        cpu, reads, work = CpuSplit(0.0, 0.0), Reads(), ServerWork()
        for part in parts:
            cpu += part.cpu
            reads += part.reads
            work += part.work
        return cls(Summary.pooled(part.summary for part in parts), cpu, reads, work)

    @property
    def cpu_each(self) -> CpuSplit:
        """The CPU of one operation, on average."""
        return self.cpu.per(self.summary.count)


async def _run(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """Post a run and return its terminal event."""
    last: dict[str, Any] = {}
    async with http.stream("POST", f"/agents/{AGENT}", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                last = json.loads(line.removeprefix("data:"))
    return last


async def _pause(http: httpx.AsyncClient, message_id: str = "u1") -> tuple[str, dict[str, Any]]:
    """Open a new thread whose first run pauses on one approval; the thread and the
    resume body that approves it.

    Args:
        message_id: The user message's id. The same on every thread by default, so the
            gateway's cache of sent messages (``gateway/sent_messages.py``) holds it once;
            clients that make a new one for each message fill that cache.

    Raises:
        RuntimeError: The thread did not pause.
    """
    thread_id = f"bench-{uuid.uuid4()}"
    message = {"id": message_id, "role": "user", "content": "mail a@b.com"}
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


async def cycle(http: httpx.AsyncClient, message_id: str = "u1") -> float:
    """One cycle on a new thread, its user message's id ``message_id`` (:func:`_pause`);
    returns the resume's latency in seconds."""
    _, body = await _pause(http, message_id)
    return await _resume(http, body)


async def measure_cycles(
    http: httpx.AsyncClient, total: int, concurrency: int, stack: Stack
) -> Cycles:
    """``total`` cycles from ``concurrency`` clients, each on a new thread; the rate, the
    CPU (of ``stack``'s dev server and this process) and the reads count whole cycles."""
    latencies: list[float] = []

    async def client(cycles: int) -> None:
        for _ in range(cycles):
            latencies.append(await cycle(http))

    return await metered(
        stack, latencies, (client(total // concurrency) for _ in range(concurrency))
    )


async def measure_resumes(
    http: httpx.AsyncClient, total: int, concurrency: int, stack: Stack
) -> Cycles:
    """``total`` threads paused first (untimed), then resumed by ``concurrency`` clients;
    the rate and the CPU count resumes alone: how fast approvals go through."""
    bodies: list[dict[str, Any]] = []

    async def pause(count: int) -> None:
        for _ in range(count):
            bodies.append((await _pause(http))[1])

    await asyncio.gather(*(pause(total // concurrency) for _ in range(concurrency)))
    latencies: list[float] = []

    async def client(queue: list[dict[str, Any]]) -> None:
        while queue:
            latencies.append(await _resume(http, queue.pop()))

    return await metered(stack, latencies, (client(bodies) for _ in range(concurrency)))


async def metered(
    stack: Stack, latencies: list[float], clients: Iterable[Coroutine[Any, Any, None]]
) -> Cycles:
    """Run ``clients`` at once, which add to ``latencies``; what they took. The server's
    counters are read outside the CPU's window, once they hold what came before."""
    work = await settled_work(stack.metrics_url)
    cpu, reads = cpu_now(stack.server_pid), stack.reads.reads
    began = time.perf_counter()
    await asyncio.gather(*clients)
    elapsed = time.perf_counter() - began
    spent = cpu_now(stack.server_pid) - cpu
    return Cycles(
        Summary(tuple(latencies), elapsed),
        spent,
        stack.reads.reads - reads,
        await settled_work(stack.metrics_url) - work,
    )
