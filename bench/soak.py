"""``python -m bench.soak --minutes M``: interrupt cycles without pause, memory read as
they go.

``make bench`` and ``make bench-waiting`` read a few minutes, or threads that wait. A
deployment serves runs for weeks, and what its processes keep per thread or per
principal (the gateway's caches, the worker's workflow cache, the server's) must stop
growing once full. On the engine as deployed (``bench/deployed.py``: the dev server on a
SQLite file in WAL mode, worker and gateway in processes of their own, the worker a
build of a Worker Deployment as ``make run`` runs it), ``--concurrency`` clients run
interrupt cycles (:func:`bench.cycles.cycle`: a new thread paused on an approval, then
approved; each user message with an id of its own, as clients make them) for
``--minutes``, and every ``--every`` seconds the resident memory of each process and
the database's size are read. Last, what each process grew by over the last third, per
thousand cycles: memory kept without bound shows there, and so does a cache still
filling, so the default length is one in which the gateway's caches fill at c=16 on a
2-core machine. See ``docs/bench.md``, "Memory under a long load".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.cycles import cycle
from bench.deployed import MB, Deployed, deployed, rss_bytes
from gateway.tokens import mint

SUBJECT = "bench-soak"
REQUEST_SECONDS = 60.0


@dataclass(frozen=True)
class Reading:
    """The stack at one moment of the soak."""

    seconds: float
    cycles: int
    server_rss: int
    worker_rss: int
    gateway_rss: int
    database: int

    @classmethod
    def of(cls, stack: Deployed, began: float, cycles: int) -> Reading:
        """``stack`` now, ``cycles`` done since ``began``."""
        return cls(
            time.perf_counter() - began,
            cycles,
            rss_bytes(stack.server_pid),
            rss_bytes(stack.worker_pid),
            rss_bytes(stack.gateway_pid),
            stack.database_bytes(),
        )


@dataclass(frozen=True)
class Soak:
    """What a soak read, in order, and its failed cycles by kind."""

    readings: list[Reading]
    errors: Counter[str]


async def measure(args: argparse.Namespace, directory: Path) -> Soak:
    """The soak, on a stack started in ``directory``."""
    async with deployed(directory, args.concurrency, versioned=True) as stack:
        secret = stack.settings.auth_hs256_secret
        assert secret is not None
        token = mint(secret.get_secret_value(), SUBJECT, (), settings=stack.settings)
        async with httpx.AsyncClient(
            base_url=stack.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=REQUEST_SECONDS,
            limits=httpx.Limits(max_connections=args.concurrency),
        ) as http:
            done, errors = 0, Counter[str]()
            began = time.perf_counter()
            deadline = began + args.minutes * 60

            async def client() -> None:
                nonlocal done
                while time.perf_counter() < deadline:
                    try:
                        await cycle(http, f"u-{uuid.uuid4()}")
                    except (httpx.HTTPError, RuntimeError) as error:
                        errors[f"{type(error).__name__}: {error}"[:120]] += 1
                    else:
                        done += 1

            readings = [Reading.of(stack, began, 0)]
            clients = asyncio.gather(*(client() for _ in range(args.concurrency)))
            while not clients.done():
                await asyncio.wait([clients], timeout=args.every)
                readings.append(Reading.of(stack, began, done))
            await clients
    return Soak(readings, errors)


def render(soak: Soak, concurrency: int) -> str:
    """The readings, and each process's growth over the last third."""
    first, last = soak.readings[0], soak.readings[-1]
    third = min(soak.readings[:-1], key=lambda reading: abs(reading.seconds - last.seconds * 2 / 3))
    lines = [
        f"Soak: fresh interrupt cycles at c={concurrency} for {last.seconds / 60:.1f} min, "
        f"{last.cycles} cycles ({last.cycles / last.seconds:.1f}/s), "
        f"{sum(soak.errors.values())} errors",
        "",
        f"  {'minute':>7}{'cycles':>9}{'server RSS MB':>15}{'worker RSS MB':>15}"
        f"{'gateway RSS MB':>16}{'database MB':>13}",
    ]
    lines += [
        f"  {reading.seconds / 60:>7.1f}{reading.cycles:>9}{reading.server_rss / MB:>15.1f}"
        f"{reading.worker_rss / MB:>15.1f}{reading.gateway_rss / MB:>16.1f}"
        f"{reading.database / MB:>13.1f}"
        for reading in soak.readings
    ]
    cycles = last.cycles - third.cycles
    lines.append("")
    for name, before, after, start in (
        ("server", third.server_rss, last.server_rss, first.server_rss),
        ("worker", third.worker_rss, last.worker_rss, first.worker_rss),
        ("gateway", third.gateway_rss, last.gateway_rss, first.gateway_rss),
    ):
        grown = (after - before) / MB
        each = f"{grown / cycles * 1000:+.2f} MB per 1,000 cycles" if cycles else "no cycles"
        lines.append(
            f"  {name:<8} {start / MB:.0f} MB at the start, {after / MB:.0f} at the end; "
            f"last third {grown:+.1f} MB ({each})"
        )
    for kind, count in soak.errors.most_common():
        lines.append(f"  error x{count}: {kind}")
    return "\n".join(lines)


async def main() -> None:
    """Parse the flags, soak, print the figures."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--minutes", type=float, default=45.0, help="how long (default 45)")
    parser.add_argument("--concurrency", type=int, default=16, help="clients (default 16)")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between readings")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as directory:
        soak = await measure(args, Path(directory))
    print(render(soak, args.concurrency), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
    # As ``bench/__main__.py``: skip interpreter teardown, which the Temporal core's
    # native threads can abort.
    sys.stdout.flush()
    os._exit(0)
