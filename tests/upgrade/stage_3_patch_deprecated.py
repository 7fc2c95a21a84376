"""Stage 3, the old branch gone: only ``send_v2``, behind ``workflow.deprecate_patch``.

Safe once no open run has taken the old branch: this code would replay its ``send_v1``
as ``send_v2`` and fail with a nondeterminism error. It replays the runs of stage 2,
whose marker it matches; the marker it writes itself is marked deprecated, which lets
stage 4 skip it (and stage 2 still reads it, so rolling back to stage 2 is safe).

Move to stage 4 once no run that stage 2 marked is open; simplest to check, once no run
started before this deploy is open.
"""

from __future__ import annotations

from temporalio import workflow

from tests.upgrade.approvals import SEND_TIMEOUT, Approvals

with workflow.unsafe.imports_passed_through():
    from tests.upgrade.activities import send_v2


@workflow.defn(name="UpgradeExample")
class UpgradeExample(Approvals):
    """Waits for ``approvals`` approvals, sending once after each (see ``Approvals``)."""

    @workflow.run
    async def run(self, approvals: int) -> list[str]:
        for _ in range(approvals):
            await self.next_approval()
            workflow.deprecate_patch("send-v2")
            self.sent.append(
                await workflow.execute_activity(send_v2, start_to_close_timeout=SEND_TIMEOUT)
            )
        return self.sent
