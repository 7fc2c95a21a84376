"""What runs cost in workflow history, the resource Temporal bounds per workflow run.

The events and bytes a run adds decide how many runs fit in one workflow run before it
must continue as new (Temporal warns at 10,240 events or 10 MB and fails a workflow run
at 51,200 events or 50 MB). A thread continues as new after its runs (by default after
each one), so its cost is counted in the workflow run that served each run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from bench.stats import RunTiming


@dataclass(frozen=True)
class HistorySize:
    """A history's length in events and its size in protobuf bytes, as the server
    stores and limits it."""

    events: int
    bytes: int

    def __add__(self, other: HistorySize) -> HistorySize:
        return HistorySize(self.events + other.events, self.bytes + other.bytes)

    def __sub__(self, other: HistorySize) -> HistorySize:
        return HistorySize(self.events - other.events, self.bytes - other.bytes)


@dataclass(frozen=True)
class HistoryGrowth:
    """What each of several consecutive runs added to workflow history."""

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


async def workflow_runs(client: Client, workflow_id: str) -> list[Sequence[HistoryEvent]]:
    """The history of each workflow run of ``workflow_id``, first to last.

    Fetching a workflow's history by its id alone reads only its latest workflow run, so
    this follows the continue-as-new chain from the first.
    """
    latest = await client.get_workflow_handle(workflow_id).describe()
    run_id = latest.raw_description.workflow_execution_info.first_run_id
    runs: list[Sequence[HistoryEvent]] = []
    while run_id:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        events = (await handle.fetch_history()).events
        runs.append(events)
        continued = events[-1].workflow_execution_continued_as_new_event_attributes
        run_id = continued.new_execution_run_id
    return runs


async def served_runs(client: Client, workflow_id: str) -> HistoryGrowth:
    """What each run (``run_agent`` update) of ``workflow_id`` cost, first to last, in the
    workflow run that served it (:func:`workflow_runs`).

    A run is counted from the end of the run before it in the same workflow run (or from
    that workflow run's start) to its update's completion, and the last run of a workflow
    run also gets what follows (its continue-as-new). The latest workflow run counts for
    no run until it serves one.
    """
    runs = await workflow_runs(client, workflow_id)
    return HistoryGrowth(tuple(size for events in runs for size in _per_update(events)))


def _per_update(events: Sequence[HistoryEvent]) -> list[HistorySize]:
    """One workflow run's history split after each completed update."""
    sizes: list[HistorySize] = []
    pending = HistorySize(0, 0)
    for event in events:
        pending += HistorySize(1, event.ByteSize())
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            sizes.append(pending)
            pending = HistorySize(0, 0)
    if sizes:
        sizes[-1] += pending
    return sizes
