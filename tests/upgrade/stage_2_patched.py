"""Stage 2, the change deployed behind ``workflow.patched``: old runs keep ``send_v1``,
the rest send with ``send_v2``.

``patched`` decides once per run, at its first call, and the run keeps that answer: true
when the call runs live (the marker it writes makes replays agree), false when replaying
a history that went past this point without the marker. So a run that sent ``v1`` under
stage 1 goes on sending ``v1``, on later approvals too, while a run still waiting for its
first approval sends ``v2`` once answered: its history holds nothing that contradicts it.

Move to stage 3 once no open run has taken the old branch; simplest to check, once no run
started before this deploy is open (the list query in docs/operations.md).
"""

from __future__ import annotations

from temporalio import workflow

from tests.upgrade.approvals import SEND_TIMEOUT, Approvals

with workflow.unsafe.imports_passed_through():
    from tests.upgrade.activities import send_v1, send_v2


@workflow.defn(name="UpgradeExample")
class UpgradeExample(Approvals):
    """Waits for ``approvals`` approvals, sending once after each (see ``Approvals``)."""

    @workflow.run
    async def run(self, approvals: int) -> list[str]:
        for _ in range(approvals):
            await self.next_approval()
            if workflow.patched("send-v2"):
                self.sent.append(
                    await workflow.execute_activity(send_v2, start_to_close_timeout=SEND_TIMEOUT)
                )
            else:
                self.sent.append(
                    await workflow.execute_activity(send_v1, start_to_close_timeout=SEND_TIMEOUT)
                )
        return self.sent
