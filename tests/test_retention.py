"""``AGUI_THREAD_RETENTION``: a schedule sweeps away threads idle longer than it, and
keeps those with recent activity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client, ScheduleActionExecutionStartWorkflow
from temporalio.service import RPCError, RPCStatusCode

from gateway.streaming import thread_handle
from settings import Settings
from tests.helpers import eventually, new_thread, post_run, run_input, serve_stack
from worker import ensure_retention_schedule, retention_schedule_id
from workflows import search_attributes
from workflows.retention import RetentionSweep

RETENTION = timedelta(seconds=3)


async def _last_activity(client: Client, thread_id: str) -> datetime:
    described = await thread_handle(client, thread_id).describe()
    last = described.typed_search_attributes.get(search_attributes.LAST_ACTIVITY)
    assert last is not None
    return last


async def _exists(client: Client, thread_id: str) -> bool:
    try:
        await thread_handle(client, thread_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def test_a_sweep_deletes_idle_threads_and_keeps_active_ones(client: Client) -> None:
    async with serve_stack(client) as stack:
        # A schedule's intervals count from the epoch, so an hourly one fires at each full
        # hour, which a test may straddle (one did, in CI). A century between sweeps: only
        # the trigger below starts one.
        settings = Settings(
            task_queue=stack.task_queue,
            thread_retention=RETENTION,
            retention_sweep_interval=timedelta(days=36525),
        )
        await ensure_retention_schedule(client, settings)
        # A second worker starting updates the schedule rather than failing.
        await ensure_retention_schedule(client, settings)
        schedule = client.get_schedule_handle(retention_schedule_id(stack.task_queue))
        try:
            idle = new_thread()
            await post_run(stack.http, "demo", run_input(idle, "r1", "hello"))
            idle_since = await _last_activity(client, idle)

            async def idle_past_retention() -> bool:
                # The sweep's cutoff is its start less the retention.
                return datetime.now(UTC) - RETENTION > idle_since + timedelta(seconds=0.5)

            await eventually(idle_past_retention, what="the first thread to be idle long enough")
            active = new_thread()
            await post_run(stack.http, "demo", run_input(active, "r1", "hello"))
            await schedule.trigger()

            async def swept() -> bool:
                return bool((await schedule.describe()).info.recent_actions)

            await eventually(swept, what="the schedule to start a sweep")
            (action,) = (await schedule.describe()).info.recent_actions
            assert isinstance(action.action, ScheduleActionExecutionStartWorkflow)
            sweep = client.get_workflow_handle_for(RetentionSweep.run, action.action.workflow_id)
            report = await sweep.result()
            assert (report.deleted, report.more) == (1, False)

            await eventually(lambda: _gone(client, idle), what="the idle thread deleted")
            assert await _exists(client, active)
            assert (await stack.http.get(f"/threads/{active}")).status_code == 200
        finally:
            # Retention unset: the worker removes the schedule.
            await ensure_retention_schedule(client, Settings(task_queue=stack.task_queue))
        with pytest.raises(RPCError) as missing:
            await schedule.describe()
        assert missing.value.status == RPCStatusCode.NOT_FOUND


async def _gone(client: Client, thread_id: str) -> bool:
    return not await _exists(client, thread_id)
