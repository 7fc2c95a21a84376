"""``python -m bench.waiting --threads N``: many threads waiting on interrupts.

Issue 19's target: 100,000 threads waiting on interrupts with a worker whose memory
stays flat, and ``GET /interrupts`` answering in under a second for one approver among
them. On the engine as deployed (``bench/deployed.py``: dev server on a SQLite file in
WAL mode, worker and gateway in processes of their own), it makes N threads of the
``payments`` agent, each paused on a payment's approval:

1. ``--sample`` threads through the gateway (``POST /agents/payments``, at
   ``--concurrency``): the real path, whose rate it reports. ``--approver-threads`` of
   them ask to pay 250, which someone in ``finance`` approves: the approver's interrupts.
   The rest ask to pay 50, which their owner approves.
2. The other threads as the engine's own continue-as-new starts a waiting thread's
   next workflow run: the input, memo and search attributes of a sample thread's
   current run (after its paused run it continued as new), its thread id replaced.
   The worker runs each as it runs any waiting thread (its first workflow task, its
   deadline timers). Through the gateway every thread would also run its agent's turn,
   at the rate step 1 reports, too slow for 100,000 in a bench's time; what a waiting
   thread is, and costs the worker, is the same. They go in batches; after each, once
   the worker has taken the batch's workflow tasks, the worker's memory is read.

Then it times ``GET /interrupts`` for the approver (who may decide the few) and for
the owner of all the threads, and decides one continued thread's interrupt through the
gateway, which must settle it. See ``docs/bench.md``, "Waiting threads".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench.continued import Template, continue_as, drained, template_of
from bench.cpu import cpu_seconds
from bench.deployed import MB, Deployed, deployed, rss_bytes
from bench.stats import Summary
from gateway.errors import RETRY_AFTER_SECONDS
from gateway.tokens import mint

OWNER = "bench-owner"
APPROVER = "bench-approver"
FINANCE = "finance"
OWN_PAYMENT = "pay 50 to ACME"
"""A payment its requester approves: an interrupt in the owner's inbox only."""
FINANCE_PAYMENT = "pay 250 to ACME"
"""A payment someone in finance approves: an interrupt in the approver's inbox too."""
PAUSE_ATTEMPTS = 3
DRAIN_PROBES = 20
"""Threads of a batch whose first workflow task must be done before the next batch."""
DEADLINE_SECONDS = 3 * 3600.0
INBOX_TIMEOUT_SECONDS = 600.0
"""The owner's inbox reads every thread's memo: minutes at 100,000."""


@dataclass(frozen=True)
class Mark:
    """The stack after ``threads`` threads were waiting, ``seconds`` into the bench."""

    threads: int
    began: float
    """When the bench began (``time.perf_counter()``)."""
    seconds: float
    worker_rss: int
    server_rss: int
    database: int
    """The SQLite file and its WAL, in bytes."""
    worker_cpu: float
    server_cpu: float
    """CPU seconds each process has used so far."""


@dataclass(frozen=True)
class Waiting:
    """What the bench measured."""

    threads: int
    sample: int
    sample_seconds: float
    retried: int
    """Runs of the sample sent again after ``TEMPORAL_UNAVAILABLE``."""
    clone_seconds: float
    marks: list[Mark]
    approver: Summary
    approver_interrupts: int
    owner: Summary
    owner_interrupts: int
    decided_seconds: float


async def _pause(http: httpx.AsyncClient, thread_id: str, text: str, retried: list[str]) -> None:
    """Open thread ``thread_id`` with ``text``; it must pause on one interrupt.

    A run the gateway answers with ``TEMPORAL_UNAVAILABLE`` (the server overloaded) is
    sent again after ``Retry-After``, as a client does, and noted in ``retried``.
    """
    body = {
        "threadId": thread_id,
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": text}],
    }
    for _ in range(PAUSE_ATTEMPTS):
        last: dict[str, Any] = {}
        async with http.stream("POST", "/agents/payments", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    last = json.loads(line.removeprefix("data: "))
        if last.get("code") != "TEMPORAL_UNAVAILABLE":
            break
        retried.append(thread_id)
        await asyncio.sleep(RETRY_AFTER_SECONDS)
    if (last.get("outcome") or {}).get("type") != "interrupt":
        raise RuntimeError(f"thread {thread_id} did not pause: {last}")


async def _bounded(jobs: Sequence[Callable[[], Awaitable[None]]], concurrency: int) -> None:
    """Run ``jobs``, ``concurrency`` at a time."""
    pending = iter(jobs)

    async def lane() -> None:
        for job in pending:
            await job()

    await asyncio.gather(*(lane() for _ in range(concurrency)))


def _mark(stack: Deployed, threads: int, began: float) -> Mark:
    return Mark(
        threads,
        began,
        time.perf_counter() - began,
        rss_bytes(stack.worker_pid),
        rss_bytes(stack.server_pid),
        stack.database_bytes(),
        cpu_seconds(stack.worker_pid),
        cpu_seconds(stack.server_pid),
    )


async def _timed(http: httpx.AsyncClient, calls: int) -> tuple[Summary, int]:
    """``calls`` sequential ``GET /interrupts``; their latencies, and how many
    interrupts the first page listed."""
    latencies: list[float] = []
    listed = 0
    began = time.perf_counter()
    for _ in range(calls):
        start = time.perf_counter()
        response = await http.get("/interrupts", params={"limit": 100})
        latencies.append(time.perf_counter() - start)
        response.raise_for_status()
        listed = len(response.json()["interrupts"])
    return Summary(tuple(latencies), time.perf_counter() - began), listed


async def _decide(http: httpx.AsyncClient, thread_id: str) -> float:
    """Approve thread ``thread_id``'s interrupt as its owner; seconds until settled."""
    view = (await http.get(f"/threads/{thread_id}")).json()
    [interrupt] = view["interrupts"]
    start = time.perf_counter()
    response = await http.post(
        f"/threads/{thread_id}/interrupts/{interrupt['id']}/decisions",
        json={"status": "resolved", "payload": {"approved": True}},
    )
    seconds = time.perf_counter() - start
    response.raise_for_status()
    if response.json()["outcome"] != "settled":
        raise RuntimeError(f"deciding {thread_id} did not settle it: {response.text}")
    return seconds


async def _through_gateway(
    owner: httpx.AsyncClient, args: argparse.Namespace
) -> tuple[list[str], int]:
    """The sample, paused through the gateway in random order; the ids of the owner's
    own payments' threads, and how many runs were sent again. Raises if one does not
    pause."""
    own = [f"bench-{uuid.uuid4()}" for _ in range(args.sample - args.approver_threads)]
    theirs = [f"bench-{uuid.uuid4()}" for _ in range(args.approver_threads)]
    retried: list[str] = []
    jobs = [partial(_pause, owner, t, OWN_PAYMENT, retried) for t in own]
    jobs += [partial(_pause, owner, t, FINANCE_PAYMENT, retried) for t in theirs]
    random.shuffle(jobs)
    await _bounded(jobs, args.concurrency)
    return own, len(retried)


async def _continued(
    stack: Deployed, template: Template, args: argparse.Namespace, marks: list[Mark]
) -> list[str]:
    """The threads after the sample, made from ``template`` a batch at a time, with a
    mark after each batch is waiting; one thread id of each batch."""
    made = args.sample
    picked: list[str] = []
    while made < args.threads:
        size = min(args.batch, args.threads - made)
        batch = [f"bench-{uuid.uuid4()}" for _ in range(size)]
        await _bounded(
            [partial(continue_as, stack.client, template, t) for t in batch], args.concurrency
        )
        await drained(stack.client, batch[-5:] + random.sample(batch, min(DRAIN_PROBES, size)))
        made += size
        picked.append(random.choice(batch))
        marks.append(_mark(stack, made, marks[0].began))
        print(f"{made} waiting, worker {marks[-1].worker_rss / MB:.0f} MB", file=sys.stderr)
    return picked


async def measure(args: argparse.Namespace, directory: Path) -> Waiting:
    """Everything, on a stack started in ``directory``."""
    async with deployed(directory, args.concurrency) as stack:
        secret = stack.settings.auth_hs256_secret
        assert secret is not None

        def http(subject: str, groups: tuple[str, ...] = ()) -> httpx.AsyncClient:
            token = mint(secret.get_secret_value(), subject, groups, settings=stack.settings)
            return httpx.AsyncClient(
                base_url=stack.base_url,
                headers={"Authorization": f"Bearer {token}"},
                timeout=INBOX_TIMEOUT_SECONDS,
                limits=httpx.Limits(max_connections=args.concurrency),
            )

        async with http(OWNER) as owner, http(APPROVER, (FINANCE,)) as approver:
            marks = [_mark(stack, 0, time.perf_counter())]
            own, retried = await _through_gateway(owner, args)
            marks.append(_mark(stack, args.sample, marks[0].began))
            print(f"sample: {args.sample} in {marks[-1].seconds:.0f} s", file=sys.stderr)
            template = await template_of(stack.client, own[0])
            continued = await _continued(stack, template, args, marks)
            approver_times, approver_listed = await _timed(approver, args.inbox_calls)
            owner_times, owner_listed = await _timed(owner, args.owner_calls)
            decided = await _decide(owner, random.choice(continued or own))
    return Waiting(
        args.threads,
        args.sample,
        marks[1].seconds,
        retried,
        marks[-1].seconds - marks[1].seconds,
        marks,
        approver_times,
        approver_listed,
        owner_times,
        owner_listed,
        decided,
    )


def render(result: Waiting) -> str:
    """The figures, as ``docs/bench.md`` quotes them."""
    cloned = result.threads - result.sample
    lines = [
        f"Waiting threads: {result.threads}, each paused on one interrupt; the embedded dev "
        "server on a SQLite file (WAL), worker and gateway in processes of their own",
        f"  through the gateway: {result.sample} in {result.sample_seconds:.1f} s "
        f"({result.sample / result.sample_seconds:.1f}/s; {result.retried} runs sent again)",
        f"  continued as new:    {cloned} in {result.clone_seconds:.1f} s "
        f"({cloned / result.clone_seconds if result.clone_seconds else 0:.1f}/s)",
        "",
        f"  {'threads':>9}{'elapsed s':>11}{'worker RSS MB':>15}{'server RSS MB':>15}"
        f"{'database MB':>13}{'worker CPU s':>14}{'server CPU s':>14}",
    ]
    lines += [
        f"  {mark.threads:>9}{mark.seconds:>11.0f}{mark.worker_rss / MB:>15.1f}"
        f"{mark.server_rss / MB:>15.1f}{mark.database / MB:>13.1f}"
        f"{mark.worker_cpu:>14.1f}{mark.server_cpu:>14.1f}"
        for mark in result.marks
    ]
    lines += [
        "",
        f"  {'GET /interrupts?limit=100':<34}{'n':>4}{'p50 ms':>9}{'p95 ms':>9}{'listed':>8}",
    ]
    for name, summary, listed in (
        ("approver (finance), a few", result.approver, result.approver_interrupts),
        ("owner of them all", result.owner, result.owner_interrupts),
    ):
        lines.append(
            f"  {name:<34}{summary.count:>4}{summary.percentile(50) * 1000:>9.1f}"
            f"{summary.percentile(95) * 1000:>9.1f}{listed:>8}"
        )
    lines.append(
        f"  a continued thread's interrupt decided through the gateway: settled in "
        f"{result.decided_seconds * 1000:.0f} ms"
    )
    return "\n".join(lines)


async def main() -> None:
    """Parse the flags, measure, print the figures."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.waiting",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--threads", type=int, default=100_000, help="waiting threads in all")
    parser.add_argument("--sample", type=int, default=500, help="of them through the gateway")
    parser.add_argument(
        "--approver-threads", type=int, default=5, help="of the sample, the approver's"
    )
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight")
    parser.add_argument("--batch", type=int, default=2_000, help="threads between readings")
    parser.add_argument("--inbox-calls", type=int, default=20, help="the approver's, timed")
    parser.add_argument("--owner-calls", type=int, default=3, help="the owner's, timed")
    args = parser.parse_args()
    if not 0 < args.approver_threads < args.sample <= args.threads:
        parser.error("need 0 < --approver-threads < --sample <= --threads")
    with tempfile.TemporaryDirectory(prefix="bench-waiting-") as directory:
        async with asyncio.timeout(DEADLINE_SECONDS):
            result = await measure(args, Path(directory))
    print(render(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
    # As ``bench/__main__.py``: skip interpreter teardown, which the Temporal core's
    # native threads can abort.
    sys.stdout.flush()
    os._exit(0)
