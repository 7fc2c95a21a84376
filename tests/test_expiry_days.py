"""Deadlines days away fire on time with nobody connected (time-skipping test server)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from settings import Settings
from tests.helpers import LONG_LIVED, OWNER, run_input, start_thread
from worker import build_worker
from workflows.agents import EXAMPLES
from workflows.models import RunRequest
from workflows.thread import ThreadWorkflow


@pytest.mark.parametrize(
    "lifetime", [timedelta(hours=1), timedelta(days=3), timedelta(days=30)], ids=str
)
@pytest.mark.parametrize("continue_after", [LONG_LIVED, 1], ids=["same-run", "continued-as-new"])
async def test_an_interrupt_expires_exactly_at_its_deadline(
    skipping: WorkflowEnvironment, lifetime: timedelta, continue_after: int
) -> None:
    """With ``continue_after=1`` the thread continues as new right after the run that
    opened the interrupt, so the timer that fires is one the new workflow run set."""
    settings = Settings(task_queue=f"tq-{uuid.uuid4()}")
    thread_id = f"thread-{uuid.uuid4()}"
    async with build_worker(skipping.client, settings, EXAMPLES):
        handle = await start_thread(skipping.client, settings.task_queue, thread_id, continue_after)
        body = run_input(
            thread_id,
            "r1",
            "quarterly",
            forwardedProps={"expiresInSeconds": lifetime.total_seconds()},
        )
        reply = await handle.execute_update(
            ThreadWorkflow.run_agent,
            RunRequest.model_validate({"agent": "demo", "input": body, "principal": OWNER}),
        )
        assert reply.events[-1].event.outcome.type == "interrupt"  # type: ignore[union-attr]

        await skipping.sleep(lifetime - timedelta(minutes=1))
        assert len((await handle.query(ThreadWorkflow.view)).interrupts) == 1
        continued = (await handle.describe()).run_id != handle.first_execution_run_id
        assert continued == (continue_after == 1)

        await skipping.sleep(timedelta(minutes=2))
        view = await handle.query(ThreadWorkflow.view)
        assert view.interrupts == []
        assert view.messages[-1].content == "Quarterly filing: expired, nothing filed."
        assert view.status == "idle"
