"""The floor workflow: the cheapest possible update, what one Temporal round trip costs.

Its own module, importing nothing but Temporal, so the workflow sandbox accepts it.
"""

from __future__ import annotations

from temporalio import workflow


@workflow.defn
class FloorWorkflow:
    """Update ``ping`` returns its argument at once."""

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def ping(self, value: int) -> int:
        return value
