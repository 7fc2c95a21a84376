"""What runs cost in workflow history, the resource Temporal bounds per workflow.

A thread is one long-lived workflow, so the events and bytes each run adds decide how
many runs fit before the thread must continue as new (Temporal warns at 10,240 events or
10 MB and fails a workflow at 51,200 events or 50 MB).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from temporalio.client import Client

from bench.stats import RunTiming


@dataclass(frozen=True)
class HistorySize:
    """A history's length in events and its size in protobuf bytes, as the server
    stores and limits it."""

    events: int
    bytes: int

    def __sub__(self, other: HistorySize) -> HistorySize:
        return HistorySize(self.events - other.events, self.bytes - other.bytes)


EMPTY = HistorySize(0, 0)
"""The history of a workflow that does not exist yet."""


@dataclass(frozen=True)
class HistoryGrowth:
    """What each of several consecutive runs added to one workflow's history."""

    per_run: tuple[HistorySize, ...]

    @property
    def events_per_run(self) -> float:
        """Mean events a run adds."""
        return sum(size.events for size in self.per_run) / len(self.per_run)

    @property
    def bytes_per_run(self) -> float:
        """Mean bytes a run adds."""
        return sum(size.bytes for size in self.per_run) / len(self.per_run)


async def history_size(client: Client, workflow_id: str) -> HistorySize:
    """The current history of ``workflow_id``."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return HistorySize(len(history.events), sum(event.ByteSize() for event in history.events))


async def tracked_runs(
    client: Client,
    workflow_id: str,
    run: Callable[[], Awaitable[RunTiming]],
    runs: int,
    baseline: HistorySize,
) -> tuple[list[RunTiming], HistoryGrowth]:
    """Do ``runs`` runs one after another, reading the history after each.

    The history is read between runs, outside the timed part, and reading it adds
    nothing to it.
    """
    timings: list[RunTiming] = []
    added: list[HistorySize] = []
    before = baseline
    for _ in range(runs):
        timings.append(await run())
        after = await history_size(client, workflow_id)
        added.append(after - before)
        before = after
    return timings, HistoryGrowth(tuple(added))
