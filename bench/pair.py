"""``python -m bench.pair [--a REF] [--b REF] [--a-env KEY=VALUE] [--b-env KEY=VALUE]
[--turns N]``: two builds of the engine, each as ``make run`` runs it, measured in turns.

On this machine two runs of one stack, one after the other, differ by more than most
changes worth measuring (``docs/bench.md``, "Two builds in pairs"). So both run at once:
each ref of this repository is cloned into a temporary directory and started there with
``scripts/run.py`` (the embedded server on its SQLite file, Worker Versioning, payloads
encrypted: ``make run`` with free ports and a fresh ``.data``), with the environment
variables given for it. The interrupt cycles (:func:`bench.cycles.cycle`) then go to one
stack and to the other in turns, the order swapped every round, and each of a stack's
processes (Temporal, worker, gateway) is read from ``/proc`` around its own turns. A
difference a build shows in one pairing should show again with the two swapped. Each
stack's Temporal server serves that stack alone, so its own counters, read before and
after a concurrency's turns (:mod:`bench.server_work`), say exactly what a cycle asked of
it: a change to a cycle's workflow tasks or writes shows there without noise.

With ``--turns N``, each stack gets conversations instead (``bench.growth``'s turns: an
interrupt cycle each, the conversation and the state resent), read at turns 2, N/4, N/2
and N: a conversation's growth by process, the client apart. As in ``make bench``, each
mark has a conversation of its own, and the marks' windows of both stacks are taken side
by side, in rounds (``bench.growth.in_rounds``).

Only committed code is measured: a ref is resolved in this repository
(``git rev-parse``), so a change to compare goes on a branch first.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.cpu import children, cpu_seconds
from bench.cycles import cycle
from bench.deployed import ROOT, healthy, stop
from bench.growth import WINDOW, CpuReader, Mark, Side, in_rounds, marks_of, resume_rows
from bench.report import ordinal
from bench.server_work import ServerWork, settled_work
from bench.stack import free_port
from bench.stats import Summary

PROCESSES = ("temporal", "worker", "gateway")
"""What ``make run`` starts, as this bench names them."""
WARMUP_CYCLES = 10
"""Cycles each stack runs before it is measured: the first threads pay for caches and
connections."""
REQUEST_SECONDS = 120.0
"""How long one of the bench's requests may take: the first waits while
``scripts/run.py`` makes its build current."""
METRICS_BANNER = re.compile(rb"Temporal Metrics:\s+(\S+)")
"""Where the dev server's banner (in the stack's ``run.log``) says it serves its metrics."""


@dataclass(frozen=True)
class Build:
    """One side of the comparison: a ref of this repository and its environment."""

    label: str
    ref: str
    env: dict[str, str]

    def __str__(self) -> str:
        extra = " ".join(f"{key}={value}" for key, value in self.env.items())
        return f"{self.label}: {self.ref}{' ' + extra if extra else ''}"


@dataclass
class Tally:
    """What one stack's turns at one concurrency added up to."""

    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PROCESSES, 0.0))
    work: ServerWork = ServerWork()
    """What the stack's Temporal server did meanwhile (:mod:`bench.server_work`)."""

    def cpu_ms_each(self) -> dict[str, float]:
        """Each process's CPU milliseconds per cycle."""
        return {name: 1000 * seconds / len(self.latencies) for name, seconds in self.cpu.items()}


@dataclass(frozen=True)
class Running:
    """A started stack: its gateway's client, its processes' pids and its Temporal
    server's metrics."""

    http: httpx.AsyncClient
    pids: dict[str, int]
    metrics_url: str


def _checkout(ref: str, into: Path) -> None:
    """Clone this repository into ``into`` at ``ref``'s commit."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    subprocess.run(["git", "clone", "--quiet", "--shared", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", "--detach", commit], check=True)


def _children(pid: int) -> dict[str, int]:
    """The processes ``scripts/run.py`` (``pid``) started, by :data:`PROCESSES` name."""
    found: dict[str, int] = {}
    for child, argv in children(pid).items():
        if argv[0].endswith(b"/temporal"):
            found["temporal"] = child
        elif argv[1:2] == [b"worker.py"]:
            found["worker"] = child
        elif argv[1:3] == [b"-m", b"gateway"]:
            found["gateway"] = child
    if set(found) != set(PROCESSES):
        raise RuntimeError(f"expected {PROCESSES} under process {pid}, found {found}")
    return found


@asynccontextmanager
async def running(build: Build, directory: Path) -> AsyncIterator[Running]:
    """``build`` cloned into ``directory`` and started as ``make run`` starts it, until
    exit; then stopped (its clone is the caller's to delete)."""
    _checkout(build.ref, directory)
    gateway_port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TEMPORAL_", "AGUI_"))
    } | {
        "AGUI_GATEWAY_PORT": str(gateway_port),
        "AGUI_TEMPORAL_PORT": str(free_port()),
        "AGUI_TEMPORAL_UI_PORT": str(free_port()),
        # Its modules before this checkout's, which the editable install would find.
        "PYTHONPATH": str(directory),
    }
    with (directory / "run.log").open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "scripts/run.py",
            cwd=directory,
            env=env | build.env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        base_url = f"http://127.0.0.1:{gateway_port}"
        await healthy(base_url, [process])
        token = subprocess.run(
            [sys.executable, "-m", "gateway.tokens", "--sub", "bench"],
            cwd=directory,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        async with httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=REQUEST_SECONDS,
            limits=httpx.Limits(keepalive_expiry=2.0),
        ) as http:
            for _ in range(WARMUP_CYCLES):
                await cycle(http)
            yield Running(http, _children(process.pid), _metrics_url(directory / "run.log"))
    finally:
        await stop(process)


def _metrics_url(log: Path) -> str:
    """The metrics URL in the dev server's banner, which ``log`` holds once it serves.

    Raises:
        RuntimeError: The banner is not there.
    """
    found = METRICS_BANNER.search(log.read_bytes())
    if found is None:
        raise RuntimeError(f"no 'Temporal Metrics:' line in {log}")
    return found.group(1).decode()


async def _turn(stack: Running, tally: Tally, cycles: int, concurrency: int) -> None:
    """``concurrency`` clients each running ``cycles`` cycles on ``stack``, added to
    ``tally``."""
    before = {name: cpu_seconds(pid) for name, pid in stack.pids.items()}
    start = time.perf_counter()

    async def client() -> None:
        for _ in range(cycles):
            tally.latencies.append(await cycle(stack.http))

    await asyncio.gather(*(client() for _ in range(concurrency)))
    tally.elapsed += time.perf_counter() - start
    for name, pid in stack.pids.items():
        tally.cpu[name] += cpu_seconds(pid) - before[name]


async def measure(
    builds: tuple[Build, Build], rounds: int, cycles: int, concurrencies: list[int]
) -> dict[int, list[Tally]]:
    """Both builds' tallies (in ``builds``' order) at each concurrency, their turns
    alternating."""
    results: dict[int, list[Tally]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-pair-") as scratch:
        async with AsyncExitStack() as stacks:
            pair = [
                await stacks.enter_async_context(running(build, Path(scratch) / build.label))
                for build in builds
            ]
            for concurrency in concurrencies:
                tallies = [Tally(), Tally()]
                before = await _settled(pair)
                for round_ in range(rounds):
                    order = (0, 1) if round_ % 2 == 0 else (1, 0)
                    for side in order:
                        await _turn(pair[side], tallies[side], cycles, concurrency)
                for tally, now, then in zip(tallies, await _settled(pair), before, strict=True):
                    tally.work = now - then
                results[concurrency] = tallies
    return results


async def _settled(pair: list[Running]) -> list[ServerWork]:
    """Each stack's server work so far, once its counters hold all of it; each server
    serves its own stack alone, so its turns are all it counts."""
    return list(await asyncio.gather(*(settled_work(stack.metrics_url) for stack in pair)))


async def measure_growth(builds: tuple[Build, Build], turns: int) -> list[tuple[Mark, ...]]:
    """Each build's figures (in ``builds``' order) at turns 2, ``turns``/4, ``turns``/2
    and ``turns`` of a conversation, the marks of both builds taken side by side
    (``bench.growth.in_rounds``)."""
    marks = _marks(turns)
    with tempfile.TemporaryDirectory(prefix="bench-pair-") as scratch:
        async with AsyncExitStack() as stacks:
            pair = [
                await stacks.enter_async_context(running(build, Path(scratch) / build.label))
                for build in builds
            ]

            def reader(stack: Running) -> CpuReader:
                return lambda: {name: cpu_seconds(pid) for name, pid in stack.pids.items()}

            sides = [Side(stack.http, reader(stack)) for stack in pair]
            driven = await in_rounds(sides, marks, WINDOW)
    return [marks_of(each, marks) for each in driven]


def _marks(turns: int) -> tuple[int, ...]:
    """Where a conversation of ``turns`` turns is read."""
    return (2, turns // 4, turns // 2, turns)


def render_growth(builds: tuple[Build, Build], taken: list[tuple[Mark, ...]]) -> str:
    """The growth table: per build, the resume's p50 and each process's CPU per turn at
    each mark, and the last mark against the first."""
    marks = tuple(mark.turn for mark in taken[0])
    columns = "".join(f"{f'turn {mark}':>10}" for mark in marks)
    ratio = f"{ordinal(marks[-1])}/{ordinal(marks[0])}"
    lines = [str(build) for build in builds]
    lines.append(
        f"a conversation each mark, {marks[-1]} turns; CPU per turn the mean of the"
        f" {WINDOW} turns around a mark, resume the median; the marks side by side"
    )
    lines.append(f"  {'':<26}{columns}{ratio:>12}")
    for build, at in zip(builds, taken, strict=True):
        rows = resume_rows(at)
        rows += [
            (f"CPU ms: {name}", [mark.cpu_seconds[name] * 1000 for mark in at])
            for name in PROCESSES
        ]
        rows.append(("CPU ms: total", [sum(mark.cpu_seconds.values()) * 1000 for mark in at]))
        lines.append(f"  {build.label}")
        for name, values in rows:
            cells = "".join(f"{value:10.1f}" for value in values)
            lines.append(f"    {name:<24}{cells}{values[-1] / values[0]:>11.2f}x")
    return "\n".join(lines)


def render(builds: tuple[Build, Build], results: dict[int, list[Tally]]) -> str:
    """The table: the builds, then per concurrency each one's rate, resume p50 and CPU
    per cycle by process."""
    lines = [str(build) for build in builds]
    for concurrency, tallies in results.items():
        lines.append(
            f"c={concurrency}, {len(tallies[0].latencies)} cycles each:"
            "  cycles/s  resume p50 ms  CPU ms per cycle: temporal  worker  gateway  total"
        )
        totals = []
        for build, tally in zip(builds, tallies, strict=True):
            summary = Summary(tuple(tally.latencies), tally.elapsed)
            each = tally.cpu_ms_each()
            totals.append(sum(each.values()))
            lines.append(
                f"  {build.label:<20} {summary.rate:9.1f} {summary.percentile(50) * 1000:14.1f}"
                f" {each['temporal']:27.1f} {each['worker']:7.1f} {each['gateway']:8.1f}"
                f" {totals[-1]:6.1f}"
            )
        lines.append(f"  B's CPU per cycle / A's: {totals[1] / totals[0]:.2f}")
        for build, tally in zip(builds, tallies, strict=True):
            work = tally.work.per(len(tally.latencies))
            lines.append(
                f"  {build.label}'s server per cycle: {work.workflow_tasks:.2f} workflow tasks,"
                f" {work.activity_tasks:.2f} activity tasks, {work.state_writes:.2f} state"
                f" writes, {work.visibility_writes:.2f} visibility writes,"
                f" {work.queries:.2f} queries"
            )
    return "\n".join(lines)


def _env(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a mapping."""
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"not KEY=VALUE: {pair!r}")
        env[key] = value
    return env


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pair", description=__doc__)
    parser.add_argument("--a", default="HEAD", help="the first ref (default HEAD)")
    parser.add_argument("--b", default="HEAD", help="the second ref (default HEAD)")
    parser.add_argument("--a-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--b-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rounds", type=int, default=10, help="turns per stack (default 10)")
    parser.add_argument(
        "--cycles", type=int, default=10, help="cycles per client per turn (default 10)"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4], help="default: 1 4")
    parser.add_argument(
        "--turns",
        type=int,
        help=f"conversations read up to this many turns (at least {WINDOW + 1}) "
        "instead of fresh threads",
    )
    args = parser.parse_args()
    builds = (
        Build("A", args.a, _env(args.a_env)),
        Build("B", args.b, _env(args.b_env)),
    )
    if args.turns is not None:
        if args.turns <= WINDOW:
            parser.error(f"--turns takes at least {WINDOW + 1}")
        print(render_growth(builds, asyncio.run(measure_growth(builds, args.turns))))
        return
    results = asyncio.run(measure(builds, args.rounds, args.cycles, args.concurrency))
    print(render(builds, results))


if __name__ == "__main__":
    main()
