"""Latency samples and the few figures the report draws from them."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    """Latencies of ``len(latencies)`` operations that took ``elapsed`` seconds in all.

    The rate comes from the wall time of the whole batch, not from the latencies, so
    under concurrency it is the throughput the clients actually got.
    """

    latencies: tuple[float, ...]
    elapsed: float

    @classmethod
    def pooled(cls, batches: Iterable[Summary]) -> Summary:
        """Batches taken apart, as one: their latencies together, their times added."""
        parts = list(batches)
        latencies = tuple(latency for part in parts for latency in part.latencies)
        return cls(latencies, sum(part.elapsed for part in parts))

    @property
    def count(self) -> int:
        """How many operations were timed."""
        return len(self.latencies)

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile in seconds, nearest rank: always an observed value."""
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]

    @property
    def rate(self) -> float:
        """Operations per second over the batch."""
        return self.count / self.elapsed


@dataclass(frozen=True)
class RunTiming:
    """When a run's first and terminal events reached the client, in seconds from the
    moment the client sent the run."""

    first: float
    last: float
