"""What the engine asks of Temporal, counted by the Temporal server itself.

The dev server serves its Prometheus metrics (``--metrics-port``); the bench reads them
before and after a batch of operations and divides the difference by the operations. The
counts are exact where CPU figures are noisy, and they are what most of the server's
CPU per cycle goes to (``docs/bench.md``, "Where the server's share goes"): workflow
tasks, activity tasks, the writes of each workflow's state, the writes of its
visibility record (its search attributes and memo, which operators list threads by)
and queries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, fields

import httpx
from prometheus_client.parser import text_string_to_metric_families

REPORT_SECONDS = 1.1
"""Longer than the interval at which the dev server publishes its counters to
``/metrics``: about a second, measured (an operation shows 0.1-1.0 s after it ended)."""
SETTLE_TIMEOUT_SECONDS = 30.0
NAMESPACE = "default"
"""The namespace whose work is counted: the engine's (the server's own system workflows
run in another)."""

_COUNTERS: Mapping[str, tuple[str, frozenset[str], str | None]] = {
    "workflow_tasks": (
        "service_requests",
        frozenset({"RespondWorkflowTaskCompleted"}),
        "history",
    ),
    "activity_tasks": (
        "service_requests",
        frozenset({"RespondActivityTaskCompleted"}),
        "history",
    ),
    "state_writes": (
        "persistence_requests",
        frozenset({"CreateWorkflowExecution", "UpdateWorkflowExecution"}),
        "history",
    ),
    "visibility_writes": (
        "visibility_persistence_requests",
        frozenset(
            {
                "RecordWorkflowExecutionStarted",
                "UpsertWorkflowExecution",
                "RecordWorkflowExecutionClosed",
            }
        ),
        None,
    ),
    "queries": ("service_requests", frozenset({"QueryWorkflow"}), "frontend"),
}
"""Each count: the server's metric, the operations it sums and the service that counts
them (``None``: the metric has no namespace or service label to filter on)."""


@dataclass(frozen=True)
class ServerWork:
    """Operations the Temporal server performed, summed or per operation of the bench."""

    workflow_tasks: float = 0
    """Workflow tasks completed by a worker."""
    activity_tasks: float = 0
    """Activity tasks completed by a worker."""
    state_writes: float = 0
    """Writes of a workflow's state and history: its creation, then its tasks' and
    activities' progress."""
    visibility_writes: float = 0
    """Writes of a workflow's visibility record: opened, its search attributes or memo
    changed, closed."""
    queries: float = 0
    """Queries answered."""

    def __sub__(self, before: ServerWork) -> ServerWork:
        return ServerWork(*(getattr(self, f.name) - getattr(before, f.name) for f in fields(self)))

    def __add__(self, other: ServerWork) -> ServerWork:
        return ServerWork(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def per(self, count: int) -> ServerWork:
        """Each operation's share of ``count``."""
        return ServerWork(*(getattr(self, f.name) / count for f in fields(self)))


def parse(text: str) -> ServerWork:
    """The counts in a ``/metrics`` page of the Temporal server (some 12,000 lines, most
    of them histograms, left out before parsing)."""
    wanted = {metric for metric, _, _ in _COUNTERS.values()}
    kept = "\n".join(
        line
        for line in text.splitlines()
        if line.split("{", 1)[0] in wanted or line.startswith("# TYPE ")
    )
    totals = dict.fromkeys(_COUNTERS, 0.0)
    for family in text_string_to_metric_families(kept):
        for name, (metric, operations, service) in _COUNTERS.items():
            if family.name != metric:
                continue
            for sample in family.samples:
                labels = sample.labels
                if (
                    labels.get("operation") in operations
                    and (service is None or labels.get("service_name") == service)
                    and labels.get("namespace", NAMESPACE) == NAMESPACE
                ):
                    totals[name] += sample.value
    return ServerWork(**totals)


async def server_work(metrics_url: str) -> ServerWork:
    """What the server at ``metrics_url`` (its ``/metrics``) has done since it started."""
    async with httpx.AsyncClient() as http:
        response = await http.get(metrics_url)
    response.raise_for_status()
    return parse(response.text)


async def settled_work(metrics_url: str) -> ServerWork:
    """What the server at ``metrics_url`` has done, once its counters hold all of it: two
    reads a reporting interval apart that agree, the work before the first all published."""
    async with asyncio.timeout(SETTLE_TIMEOUT_SECONDS):
        last = await server_work(metrics_url)
        while True:
            await asyncio.sleep(REPORT_SECONDS)
            now = await server_work(metrics_url)
            if now == last:
                return now
            last = now
