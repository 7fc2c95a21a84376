"""What an interrupt cycle asks of Temporal, counted by the Temporal server itself.

Most of the server's CPU per cycle goes to workflow tasks, writes of each workflow's
state and writes of its visibility record (``docs/bench.md``, "Where the server's share
goes"). Those counts are exact, so they pin the cycle's shape: a change that adds a
workflow task or a search-attribute upsert to every run fails here, and says what it
costs, instead of showing as a few percent of noise in ``make bench``.

The thread is versioned, as ``make run`` deploys it: one workflow run per thread. An
unversioned thread continues as new after each run, and whether a new workflow run's
first task runs on its own or carries the next run depends on how soon that run comes.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from bench.cycles import cycle
from bench.server_work import ServerWork, settled_work
from settings import Settings
from tests.helpers import TEST_SECRET, free_port, serve_stack, start_dev_server
from worker import promote_first_build

CYCLES = 4


async def test_a_cycle_is_three_workflow_tasks_and_four_visibility_writes() -> None:
    # A server of its own: the counters are the whole server's.
    port = free_port()
    env = await start_dev_server(metrics_port=port)
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    task_queue, deployment = f"tq-{uuid.uuid4()}", f"agui-{uuid.uuid4().hex[:8]}"
    build = Settings(
        task_queue=task_queue,
        auth_hs256_secret=TEST_SECRET,
        worker_deployment=deployment,
        worker_build_id="b1",
    )
    try:
        async with serve_stack(
            env.client,
            task_queue,
            worker_deployment=deployment,
            worker_build_id="b1",
            # Temporal's default, not the suite's second: on a busy machine a task left
            # that long on the worker's sticky queue would be scheduled again, and counted.
            worker_sticky_queue_seconds=10,
        ) as stack:
            await promote_first_build(env.client, build)
            await cycle(stack.http)  # the deployment's first workflows, and the caches
            before = await settled_work(metrics_url)
            for _ in range(CYCLES):
                # make bench's cycle: a run on a new thread that the demo agent pauses on
                # an approval, then the resume that approves it.
                await cycle(stack.http)
            work = (await settled_work(metrics_url) - before).per(CYCLES)
    finally:
        await env.shutdown()
    # Queries are left out: a run that outlasts the gateway's first 50 ms is read by one,
    # as a busy machine's runs may.
    assert replace(work, queries=0) == ServerWork(
        # The first run's task; the resume's, which schedules send_email; the one after it.
        workflow_tasks=3,
        activity_tasks=1,
        # The workflow's state and history written: its creation, then its progress.
        state_writes=7,
        # The record opened, then one write per workflow task: each publishes the status.
        visibility_writes=4,
    )
