"""What every stage shares and no stage changes, so each stage's file shows only the
code the upgrade is about."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

SEND_TIMEOUT = timedelta(seconds=10)


class Approvals:
    """A run that waits for approvals one at a time, as a thread waits on an interrupt,
    and sends once for each.

    Signals:
        approve: one more approval.
    """

    def __init__(self) -> None:
        self.approved = 0
        self.sent: list[str] = []

    @workflow.signal
    def approve(self) -> None:
        """Answer the wait the run is in (or the next one)."""
        self.approved += 1

    async def next_approval(self) -> None:
        """A durable wait: while in it, the run's history ends at a completed workflow
        task, and a worker that picks the run up replays everything before it."""
        await workflow.wait_condition(lambda: self.approved > len(self.sent))
