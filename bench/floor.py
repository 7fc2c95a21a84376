"""The raw floors: Temporal update round trips on the bench's server.

Every AG-UI run is at least one update on its thread's workflow, so a no-op update is
the latency and throughput no run can beat on this server; the run figures are read
against it. An approval that runs a tool is at least an update that runs a local
activity, the second floor: what Temporal alone costs such a resume, before any of the
engine's own work.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from temporalio.client import Client, WorkflowHandle

from bench.stats import Summary
from bench.workflows import FloorWorkflow

WARMUP_UPDATES = 5
"""Untimed updates per workflow first, so the worker has it cached like a busy thread."""


async def measure_floor(
    client: Client, task_queue: str, count: int, concurrency: int, *, tool: bool = False
) -> Summary:
    """``count`` updates from one client: ``concurrency`` callers, one workflow each.

    One workflow per caller mirrors the runs, where each concurrent client has its own
    thread: updates to one workflow are serialised by its workflow tasks. With ``tool``,
    each update runs a no-op local activity.
    """
    update = FloorWorkflow.ping_tool if tool else FloorWorkflow.ping
    handles = [
        await client.start_workflow(
            FloorWorkflow.run, id=f"bench-floor-{uuid.uuid4()}", task_queue=task_queue
        )
        for _ in range(concurrency)
    ]
    for handle in handles:
        for i in range(WARMUP_UPDATES):
            await handle.execute_update(update, i)
    latencies: list[float] = []

    async def caller(handle: WorkflowHandle[FloorWorkflow, None], updates: int) -> None:
        for i in range(updates):
            start = time.perf_counter()
            await handle.execute_update(update, i)
            latencies.append(time.perf_counter() - start)

    began = time.perf_counter()
    await asyncio.gather(*(caller(handle, count // concurrency) for handle in handles))
    return Summary(tuple(latencies), time.perf_counter() - began)
