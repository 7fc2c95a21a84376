"""The raw floors: Temporal update round trips on the bench's server.

Every AG-UI run is at least one update on its thread's workflow, so a no-op update is
the latency and throughput no run can beat on this server; the run figures are read
against it. An approval that runs a tool is at least an update that runs a local
activity, the second floor: what Temporal alone costs such a resume, before any of the
engine's own work. The cycle's floor is a whole interrupt cycle with Temporal's share
alone (:class:`FloorCycleWorkflow`): what the cycle's CPU is read against.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy

from bench.cycles import Cycles, metered
from bench.stack import Stack
from bench.stats import Summary
from bench.workflows import FloorCycleWorkflow, FloorWorkflow

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


async def measure_floor_cycles(stack: Stack, total: int, concurrency: int) -> Cycles:
    """``total`` cycles of :class:`FloorCycleWorkflow` from ``concurrency`` callers, each
    on a new workflow, sent as the gateway sends a thread's runs: the first with
    update-with-start, each update accepted first and its result awaited after. Only
    the resume is timed, as in :func:`bench.cycles.measure_cycles`; the rate and the CPU
    count whole cycles."""
    client, task_queue = stack.client, stack.bench_task_queue
    latencies: list[float] = []

    async def cycle() -> None:
        start = WithStartWorkflowOperation(
            FloorCycleWorkflow.run,
            id=f"bench-floor-cycle-{uuid.uuid4()}",
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            task_queue=task_queue,
        )
        paused = await client.start_update_with_start_workflow(
            FloorCycleWorkflow.pause,
            0,
            start_workflow_operation=start,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
        await paused.result()
        handle = await start.workflow_handle()
        began = time.perf_counter()
        resumed = await handle.start_update(
            FloorCycleWorkflow.resume, 1, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        await resumed.result()
        latencies.append(time.perf_counter() - began)

    async def caller(cycles: int) -> None:
        for _ in range(cycles):
            await cycle()

    return await metered(
        stack, latencies, (caller(total // concurrency) for _ in range(concurrency))
    )
