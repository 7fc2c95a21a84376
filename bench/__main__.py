"""Measure the engine against Temporal's own floor, over real HTTP, on one dev server.

Prints, for the interrupt cycle run -> interrupt -> resume -> success driven through the
gateway: resume -> ``RUN_FINISHED`` latency percentiles and cycles per second at several
concurrencies; in the same run the raw Temporal update round trip on the same server as
the floor; and the history each cycle costs. ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.worker import Worker

from bench.floor import FloorWorkflow
from gateway.streaming import workflow_id_for
from tests.helpers import run_input, serve_stack, start_dev_server


@dataclass
class Figures:
    latencies: list[float]
    seconds: float

    def row(self, name: str, floor_p50: float | None = None) -> str:
        q = statistics.quantiles(self.latencies, n=100)
        rate = len(self.latencies) / self.seconds
        ratio = f"  {q[49] / floor_p50:5.2f}x floor" if floor_p50 else ""
        return (
            f"{name:<34} p50 {q[49] * 1000:7.1f} ms  p95 {q[94] * 1000:7.1f} ms  "
            f"p99 {q[98] * 1000:7.1f} ms  {rate:7.1f}/s{ratio}"
        )


async def post_run(http: httpx.AsyncClient, agent: str, body: object) -> list[dict[str, Any]]:
    """POST a run and read its SSE stream, with no checks: the client's cost stays low."""
    async with http.stream("POST", f"/agents/{agent}", json=body) as response:
        return [
            json.loads(line[6:])
            async for line in response.aiter_lines()
            if line.startswith("data: ")
        ]


async def measure_floor(client: Client, count: int, concurrency: int) -> Figures:
    """Raw update round trips against one workflow per client."""
    task_queue = f"floor-{uuid.uuid4()}"
    async with Worker(client, task_queue=task_queue, workflows=[FloorWorkflow]):
        handles = [
            await client.start_workflow(
                FloorWorkflow.run, id=f"floor-{uuid.uuid4()}", task_queue=task_queue
            )
            for _ in range(concurrency)
        ]
        latencies: list[float] = []

        async def one(handle: object, n: int) -> None:
            for i in range(n):
                start = time.perf_counter()
                await handle.execute_update(FloorWorkflow.ping, i)  # type: ignore[attr-defined]
                latencies.append(time.perf_counter() - start)

        began = time.perf_counter()
        await asyncio.gather(*(one(h, count // concurrency) for h in handles))
        elapsed = time.perf_counter() - began
        for handle in handles:
            await handle.terminate()
    return Figures(latencies, elapsed)


async def interrupted(http: httpx.AsyncClient) -> tuple[str, str]:
    """A new thread paused on one approval: its id and the interrupt's."""
    thread_id = f"bench-{uuid.uuid4()}"
    events = await post_run(http, "demo", run_input(thread_id, "r1", "mail a@b.com"))
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupt["id"]


async def approve(http: httpx.AsyncClient, thread_id: str, interrupt_id: str) -> None:
    """Resume the thread with an approval; the run must succeed."""
    entry = {"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": True}}
    body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}
    events = await post_run(http, "demo", body)
    assert events[-1]["outcome"] == {"type": "success"}


async def measure_cycles(http: httpx.AsyncClient, count: int, concurrency: int) -> Figures:
    """run -> interrupt -> resume -> success; the latency is the resume's."""
    latencies: list[float] = []

    async def one(n: int) -> None:
        for _ in range(n):
            thread_id, interrupt_id = await interrupted(http)
            start = time.perf_counter()
            await approve(http, thread_id, interrupt_id)
            latencies.append(time.perf_counter() - start)

    began = time.perf_counter()
    await asyncio.gather(*(one(count // concurrency) for _ in range(concurrency)))
    return Figures(latencies, time.perf_counter() - began)


async def history_cost(client: Client, http: httpx.AsyncClient) -> str:
    """Events and bytes one interrupt cycle adds to a thread's history."""
    thread_id, interrupt_id = await interrupted(http)
    await approve(http, thread_id, interrupt_id)
    history = await client.get_workflow_handle(workflow_id_for(thread_id)).fetch_history()
    size = len(history.to_json().encode())
    return f"history of one interrupt cycle (2 runs): {len(history.events)} events, {size} bytes"


async def main(quick: bool) -> None:
    floor_count, cycle_count = (40, 16) if quick else (200, 64)
    server = await start_dev_server()
    try:
        async with serve_stack(server.client) as stack:
            await measure_cycles(stack.http, 4, 1)  # warm up
            floor = await measure_floor(server.client, floor_count, 1)
            print(floor.row("raw update round trip (c=1)"))
            floor_p50 = statistics.quantiles(floor.latencies, n=100)[49]
            for concurrency in (1, 16, 64):
                raw = await measure_floor(
                    server.client, max(floor_count, concurrency * 4), concurrency
                )
                print(raw.row(f"raw update round trip (c={concurrency})"))
                cycles = await measure_cycles(
                    stack.http, max(cycle_count, concurrency * 2), concurrency
                )
                print(cycles.row(f"resume -> RUN_FINISHED (c={concurrency})", floor_p50))
            print(await history_cost(server.client, stack.http))
    finally:
        await server.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    asyncio.run(main(parser.parse_args().quick))
