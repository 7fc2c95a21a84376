"""The worker's workflow runner (``workflows/runner.py``) on a real Temporal server: a
query that a worker taking a workflow over answers by replaying a history that has
grown since the query was sent never sees the new events applied at the last workflow
task's time."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.worker import Worker

from worker import WORKFLOW_RUNNER
from workflows.runner import STALE_TIME

ATTEMPTS = 25
"""How many times the race is set up: whether a query task or the workflow task reaches
the new worker first is the server's choice, about even on this machine, and only the
first is the case the runner guards."""


@workflow.defn
class Stamps:
    """Notes when each signal was applied (``workflow.now()``)."""

    def __init__(self) -> None:
        self.stamps: list[datetime] = []

    @workflow.run
    async def run(self) -> None:
        self.stamps.append(workflow.now())
        await workflow.wait_condition(lambda: len(self.stamps) > 2)

    @workflow.signal
    def stamp(self) -> None:
        self.stamps.append(workflow.now())

    @workflow.query
    def read(self) -> list[datetime]:
        return self.stamps


async def test_a_query_never_sees_events_applied_at_an_earlier_tasks_time(
    client: Client,
) -> None:
    """The workflow runs its first task on a worker that caches nothing, which then
    stops. A query is sent while no task is pending, so Temporal hands it to the next
    worker to poll, with the history as it is then; a signal lands meanwhile. The new
    worker either takes the signal's workflow task first, or answers the query from a
    replay that meets the signal with no task of its own: then the runner refuses that
    state, the query fails, and the signal's task applies it at its own time. The
    answers never hold the signal stamped with the first task's time."""
    with_runner = {"workflow_runner": WORKFLOW_RUNNER, "workflows": [Stamps]}
    for _ in range(ATTEMPTS):
        refused = False
        task_queue = f"runner-{uuid.uuid4()}"
        async with Worker(client, task_queue=task_queue, max_cached_workflows=0, **with_runner):
            handle = await client.start_workflow(
                Stamps.run, id=f"stamps-{uuid.uuid4()}", task_queue=task_queue
            )
            [started] = await handle.query(Stamps.read)
        query = asyncio.ensure_future(handle.query(Stamps.read, rpc_timeout=timedelta(seconds=30)))
        await asyncio.sleep(0)  # the query goes out first: a yield, not a wait
        await handle.signal(Stamps.stamp)
        async with Worker(client, task_queue=task_queue, **with_runner):
            try:
                answer = await query
            except WorkflowQueryFailedError as err:
                assert str(err) == STALE_TIME
                refused = True
            else:
                assert started not in answer[1:], "the signal was applied at the first task's time"
            stamps = await handle.query(Stamps.read)
        history = await handle.fetch_history()
        tasks = [
            event.event_time.ToDatetime()
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
        ]
        # Each stamp is its task's start (to the microsecond the SDK rounds it to): the
        # signal's, not the first task's.
        assert len(stamps) == len(tasks) == 2
        for stamp, task in zip(stamps, tasks, strict=True):
            assert abs(stamp.replace(tzinfo=None) - task) <= timedelta(microseconds=1)
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in [
            e.event_type for e in history.events
        ]
        await handle.terminate()
        if refused:
            return
    raise AssertionError(f"the new worker took the signal's task first in all {ATTEMPTS} tries")
