"""The Temporal SDK's metrics of the gateway's own client, served in process.

The SDK's runtime records its metrics into a :class:`MetricBuffer`; a collector in the
gateway's Prometheus registry drains it and keeps the totals, so ``GET /metrics`` serves
them under the names and labels the SDK's own exporter gives them
(``temporal_request_total``, ``temporal_request_latency``...) with no second listener.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import threading
from collections.abc import Iterable

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString
from temporalio.common import MetricAttributes
from temporalio.runtime import (
    BUFFERED_METRIC_KIND_COUNTER,
    BUFFERED_METRIC_KIND_HISTOGRAM,
    BufferedMetricKind,
    MetricBuffer,
    MetricBufferDurationFormat,
)

SDK_BUCKETS = (0.05, 0.1, 0.5, 1, 2.5, 10)
"""Seconds: the buckets the SDK's own exporter gives its histograms by default, among
them every one a client records (request latencies)."""
BOUNDS = [*map(floatToGoString, SDK_BUCKETS), "+Inf"]
"""The buckets' ``le`` labels."""
SDK_BUFFER_SIZE = 100_000
"""Updates held between drains, a few per Temporal call; the SDK drops (and logs) any
beyond it."""
SDK_DRAIN_SECONDS = 1.0
"""How often the buffer is drained between scrapes, so that a gateway nobody scrapes
never fills it."""

Labels = tuple[tuple[str, str], ...]


class SdkMetrics:
    """A Prometheus collector of the SDK metrics recorded into :attr:`buffer`: counters'
    totals, gauges' last values and histograms' buckets."""

    def __init__(self) -> None:
        self.buffer = MetricBuffer(SDK_BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)
        self._families: dict[str, _SdkFamily] = {}
        self._lock = threading.Lock()

    def drain(self) -> None:
        """Take in the updates the SDK recorded since the last drain."""
        with self._lock:
            for update in self.buffer.retrieve_updates():
                metric = update.metric
                family = self._families.get(metric.name)
                if family is None:
                    family = _SdkFamily(metric.kind, metric.description or metric.name)
                    self._families[metric.name] = family
                family.update(_labels(update.attributes), update.value)

    async def drain_every(self, seconds: float) -> None:
        """Drain the buffer every ``seconds``, forever."""
        while True:
            await asyncio.sleep(seconds)
            self.drain()

    def collect(self) -> Iterable[Metric]:
        """Every SDK metric as of now (the collector protocol of ``prometheus_client``)."""
        self.drain()
        with self._lock:
            return [family.exposed(name) for name, family in self._families.items()]


def _labels(attributes: MetricAttributes) -> Labels:
    return tuple(sorted((key, str(value)) for key, value in attributes.items()))


class _SdkFamily:
    """One SDK metric's series, by their labels."""

    def __init__(self, kind: BufferedMetricKind, documentation: str) -> None:
        self._kind = kind
        self._documentation = documentation
        self._values: dict[Labels, float] = {}
        """A counter's totals or a gauge's last values."""
        self._buckets: dict[Labels, list[int]] = {}
        """A histogram's observations per bucket of ``SDK_BUCKETS`` (then ``+Inf``)."""
        self._sums: dict[Labels, float] = {}
        """A histogram's sum of observations."""

    def update(self, labels: Labels, value: float) -> None:
        """Take in one update: a counter's increment, a gauge's value or an observation."""
        if self._kind == BUFFERED_METRIC_KIND_HISTOGRAM:
            counts = self._buckets.setdefault(labels, [0] * len(BOUNDS))
            counts[bisect.bisect_left(SDK_BUCKETS, value)] += 1
            self._sums[labels] = self._sums.get(labels, 0) + value
        elif self._kind == BUFFERED_METRIC_KIND_COUNTER:
            self._values[labels] = self._values.get(labels, 0) + value
        else:
            self._values[labels] = value

    def exposed(self, name: str) -> Metric:
        """The family in Prometheus' form. Its label names are all its series' (the SDK
        adds ``namespace`` to some), empty where a series has none: to Prometheus an empty
        label is an absent one."""
        series = [*self._values, *self._buckets]
        names = sorted({key for labels in series for key, _ in labels})

        def values(labels: Labels) -> list[str]:
            present = dict(labels)
            return [present.get(key, "") for key in names]

        if self._kind == BUFFERED_METRIC_KIND_HISTOGRAM:
            histogram = HistogramMetricFamily(name, self._documentation, labels=names)
            for labels, counts in self._buckets.items():
                cumulative = list(zip(BOUNDS, itertools.accumulate(counts), strict=True))
                histogram.add_metric(values(labels), cumulative, self._sums[labels])
            return histogram
        family = (
            CounterMetricFamily(name, self._documentation, labels=names)
            if self._kind == BUFFERED_METRIC_KIND_COUNTER
            else GaugeMetricFamily(name, self._documentation, labels=names)
        )
        for labels, value in self._values.items():
            family.add_metric(values(labels), value)
        return family
