"""Stage 4, the patch gone: the code as if it had always sent with ``send_v2``.

It replays the runs of stage 3, skipping their deprecated marker, but not those of
stage 2: a marker written by ``patched`` needs code that asks for it, which is why
stage 3 comes first. Its own runs carry no marker, so stage 2 would take them for old
runs: roll back no further than stage 3.
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
            self.sent.append(
                await workflow.execute_activity(send_v2, start_to_close_timeout=SEND_TIMEOUT)
            )
        return self.sent
