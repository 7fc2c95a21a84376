"""Stage 1, the code before the change: every approval is followed by ``send_v1``.

Runs of this code may wait on an approval for weeks, and a run that has sent once has
``send_v1`` in its history for good. To change the send, deploy stage 2 next, never a
later stage: only stage 2 replays those histories.
"""

from __future__ import annotations

from temporalio import workflow

from tests.upgrade.approvals import SEND_TIMEOUT, Approvals

with workflow.unsafe.imports_passed_through():
    from tests.upgrade.activities import send_v1


@workflow.defn(name="UpgradeExample")
class UpgradeExample(Approvals):
    """Waits for ``approvals`` approvals, sending once after each (see ``Approvals``)."""

    @workflow.run
    async def run(self, approvals: int) -> list[str]:
        for _ in range(approvals):
            await self.next_approval()
            self.sent.append(
                await workflow.execute_activity(send_v1, start_to_close_timeout=SEND_TIMEOUT)
            )
        return self.sent
