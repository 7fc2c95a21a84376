"""The retention sweep: a workflow a Temporal Schedule starts every
``AGUI_RETENTION_SWEEP_INTERVAL`` (``worker.ensure_retention_schedule``), which deletes
the threads idle longer than ``AGUI_THREAD_RETENTION``.

A workflow of its own, not a loop in the worker: operators see each sweep, its result
and its failures in the Temporal Web UI, next to the schedule that starts it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.erasure import sweep_idle_threads
    from workflows.models import RetentionSweepStart, SweepReport, SweepRequest
    from workflows.thread import ThreadWorkflow

SWEEP_TIMEOUT = timedelta(minutes=10)
"""How long one sweep's deletions may take: a page of threads, each a few calls."""


@workflow.defn
class RetentionSweep:
    """One sweep: delete a page of the threads of its task queue idle since before
    ``now - start.retention``; the next sweep takes any left (``SweepReport.more``).

    No updates, signals or queries.
    """

    @workflow.run
    async def run(self, start: RetentionSweepStart) -> SweepReport:
        """Delete the idle threads; how many, and whether more are left."""
        request = SweepRequest(
            thread_type=ThreadWorkflow.__name__,
            task_queue=workflow.info().task_queue,
            # workflow.now(), not the activity's clock: the cutoff is in the history.
            cutoff=workflow.now() - start.retention,
            limit=start.limit,
        )
        return await workflow.execute_activity(
            sweep_idle_threads,
            request,
            start_to_close_timeout=SWEEP_TIMEOUT,
            heartbeat_timeout=timedelta(minutes=1),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
