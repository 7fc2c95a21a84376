"""What an open stream costs Temporal: the reads the gateway makes while it streams.

The gateway reads a run's events with queries, each a round trip through the server to
the worker that has the thread cached, where the workflow's query handler runs; between
reads a quiet stream long-polls the workflow's history, which the server answers alone
(``gateway/streaming.py``). The bench counts both on the gateway's client (a client
interceptor, so the counts are exactly the calls made) and divides by the time streams
were open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.client import (
    Client,
    FetchWorkflowHistoryEventsInput,
    Interceptor,
    OutboundInterceptor,
    QueryWorkflowInput,
    WorkflowHistoryEventAsyncIterator,
)


@dataclass(frozen=True)
class Reads:
    """Queries and history fetches made (the gateway's fetches are one long poll each)."""

    queries: int = 0
    history: int = 0

    def __sub__(self, before: Reads) -> Reads:
        return Reads(self.queries - before.queries, self.history - before.history)

    def __add__(self, other: Reads) -> Reads:
        return Reads(self.queries + other.queries, self.history + other.history)


class ReadCount(Interceptor):
    """Counts the reads made through the clients it is installed on."""

    def __init__(self) -> None:
        self.reads = Reads()

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        """Count this client's reads, then make them as usual."""
        return _Counting(next, self)


class _Counting(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, count: ReadCount) -> None:
        super().__init__(next)
        self._count = count

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        self._count.reads = Reads(self._count.reads.queries + 1, self._count.reads.history)
        return await self.next.query_workflow(input)

    def fetch_workflow_history_events(
        self, input: FetchWorkflowHistoryEventsInput
    ) -> WorkflowHistoryEventAsyncIterator:
        self._count.reads = Reads(self._count.reads.queries, self._count.reads.history + 1)
        return self.next.fetch_workflow_history_events(input)


def counted(client: Client, count: Interceptor) -> Client:
    """``client``, sharing its connection, with ``count`` (an interceptor that counts
    its calls, :class:`ReadCount` its reads) added to its interceptors."""
    config = client.config()
    config["interceptors"] = [*config["interceptors"], count]
    return Client(**config)


@dataclass(frozen=True)
class StreamCost:
    """The reads made while streams were open, and how long they were open in all."""

    reads: Reads
    stream_seconds: float

    @property
    def queries_per_second(self) -> float:
        """Queries per second per open stream."""
        return self.reads.queries / self.stream_seconds

    @property
    def history_per_second(self) -> float:
        """History long polls per second per open stream."""
        return self.reads.history / self.stream_seconds
