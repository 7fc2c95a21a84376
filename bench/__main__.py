"""``python -m bench [--quick] [--codec on|off] [--versioning on|off] [--only growth|cycles]``:
the engine's latency, throughput, CPU and history cost.

Starts its own in-memory Temporal dev server, the engine's worker, the gateway on a
loopback port and a worker for the bench's own workflows; measures the raw update floor,
the floor of an update that runs a local activity, full AG-UI runs over HTTP, the
interrupt cycle (resume -> RUN_FINISHED, and the CPU of each cycle by process) and the
same cycle with Temporal's share alone, at
concurrency 1 and 16, each in alternating rounds; then the cycle at 64, resumes alone,
one thread's history, the streaming alternatives, a streamed model's token latency (its
reply at once, and after a pause to think) with the gateway's reads per open stream, and
one conversation's growth over its turns; prints one table; stops everything.
``--only growth`` measures the growth alone, ``--only cycles`` the interrupt cycles on
fresh threads and their floor, with their CPU, alone. See docs/bench.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvloop
from pydantic import SecretStr

import codec
from bench.cpu import CpuSplit, cpu_seconds, idle_cpu
from bench.cycles import Cycles, measure_cycles, measure_resumes
from bench.deployed import deployed
from bench.floor import measure_floor, measure_floor_cycles
from bench.growth import CLIENT, WINDOW, Growth, measure_growth
from bench.report import Results, render, render_cpu, render_growth
from bench.runs import measure_runs, thread_history
from bench.stack import Stack, running_stack
from bench.stats import Summary
from bench.streams import measure_streams
from bench.tokens import Tokens, measure_tokens, token_agent
from gateway.tokens import mint
from settings import Settings
from tests.chat_server import ChatServer
from workflows.agents import EXAMPLES

DEADLINE_SECONDS = 600.0
"""A hung server or worker must not hang the bench: give up well past a normal run."""
CLIENTS = 64
"""The most clients any measurement runs at once. Each gets a connection of its own: with
fewer, clients wait for the pool (unfairly: some starve), which the latencies would
count as the engine's."""
KEEPALIVE_SECONDS = 2.0
"""How long the bench keeps an idle connection: well under uvicorn's keep-alive timeout
(5 s, which httpx's default equals), so a request never goes out on a connection the
gateway is closing that instant (an ``httpx.ReadError``)."""
ROUNDS = 5
"""The measurements at c=1 and c=16 alternate in this many rounds (:func:`_alternating`)."""
WARMUP_CYCLES = 16
"""Cycles ``--only cycles`` runs (at c=16) before it measures."""
IDLE_SECONDS = 3.0
"""How long ``--only cycles`` reads the stack's CPU with nothing sent."""
THINKING_SECONDS = 1.0
"""How long the bench's thinking model takes to its first token: a hosted model's."""


@dataclass(frozen=True)
class Counts:
    """How much of each measurement to do: bounded, so the bench ends by itself."""

    floor: dict[int, int]
    runs: dict[int, int]
    cycles: dict[int, int]
    runs_per_thread: int
    history_runs: int
    stream_runs: int
    warmup_runs: int
    token_replies: int
    tokens_per_reply: int
    thinking_replies: int
    """Replies whose first token comes ``THINKING_SECONDS`` after the model is called."""
    growth_marks: tuple[int, ...]
    """The turns of one conversation at which its growth is read, first to last."""
    growth_window: int
    """The turns around each growth mark its figures are taken over."""


FULL = Counts(
    floor={1: 200, 16: 320},
    runs={1: 100, 16: 320},
    cycles={1: 50, 16: 320, 64: 320},
    runs_per_thread=5,
    history_runs=20,
    stream_runs=30,
    warmup_runs=5,
    token_replies=10,
    tokens_per_reply=50,
    thinking_replies=5,
    growth_marks=(2, 50, 100, 200),
    growth_window=WINDOW,
)
QUICK = Counts(
    floor={1: 20, 16: 80},
    runs={1: 10, 16: 80},
    cycles={1: 5, 16: 80, 64: 64},
    runs_per_thread=2,
    history_runs=4,
    stream_runs=4,
    warmup_runs=2,
    token_replies=2,
    tokens_per_reply=20,
    thinking_replies=2,
    growth_marks=(2, 10, 20),
    growth_window=3,
)


async def bench(counts: Counts, payload_keys: SecretStr | None, versioned: bool) -> Results:
    """Measure one conversation's growth on the engine as deployed (:func:`growth_only`),
    then everything else on one freshly started stack, encrypting payloads with
    ``payload_keys`` when given, its worker ``versioned`` or not (``running_stack``)."""
    growth = await growth_only(counts, payload_keys, versioned)
    with ChatServer().serving() as model_server:
        return await _bench(counts, model_server, payload_keys, versioned, growth)


@dataclass(frozen=True)
class Alternated:
    """The figures :func:`_alternating` takes at one concurrency."""

    floor: Summary
    tool_floor: Summary
    runs: Summary
    cycles: Cycles
    floor_cycles: Cycles


async def _alternating(
    stack: Stack, http: httpx.AsyncClient, counts: Counts, concurrency: int
) -> Alternated:
    """Both floors, runs, resume cycles and the cycle's floor at ``concurrency``, taken
    in alternating rounds and pooled.

    This machine's speed drifts by up to 2x within minutes; round by round, the drift
    touches the floors and the runs alike, so their ratios hold.
    """
    floor: list[Summary] = []
    tool: list[Summary] = []
    runs: list[Summary] = []
    cycles: list[Cycles] = []
    floor_cycles: list[Cycles] = []
    client, queue, c = stack.client, stack.bench_task_queue, concurrency
    for _ in range(ROUNDS):
        floor.append(await measure_floor(client, queue, counts.floor[c] // ROUNDS, c))
        tool.append(await measure_floor(client, queue, counts.floor[c] // ROUNDS, c, tool=True))
        runs.append(await measure_runs(http, counts.runs[c] // ROUNDS, c, counts.runs_per_thread))
        cycles.append(await measure_cycles(http, counts.cycles[c] // ROUNDS, c, stack))
        floor_cycles.append(await measure_floor_cycles(stack, counts.cycles[c] // ROUNDS, c))
    return Alternated(
        Summary.pooled(floor),
        Summary.pooled(tool),
        Summary.pooled(runs),
        Cycles.pooled(cycles),
        Cycles.pooled(floor_cycles),
    )


def _http(stack: Stack) -> httpx.AsyncClient:
    """The bench's HTTP client of the stack's gateway: a connection for each client, so
    none waits for the pool (see docs/bench.md, "Order")."""
    return httpx.AsyncClient(
        base_url=stack.base_url,
        headers=stack.headers,
        timeout=30,
        limits=httpx.Limits(
            max_connections=CLIENTS,
            max_keepalive_connections=CLIENTS,
            keepalive_expiry=KEEPALIVE_SECONDS,
        ),
    )


async def _bench(
    counts: Counts,
    model_server: ChatServer,
    payload_keys: SecretStr | None,
    versioned: bool,
    growth: Growth,
) -> Results:
    async with (
        running_stack((*EXAMPLES, token_agent(model_server)), payload_keys, versioned) as stack,
        _http(stack) as http,
    ):
        await measure_runs(http, counts.warmup_runs, 1, counts.runs_per_thread)
        taken = {c: await _alternating(stack, http, counts, c) for c in (1, 16)}
        floor = {c: figures.floor for c, figures in taken.items()}
        tool_floor = {c: figures.tool_floor for c, figures in taken.items()}
        runs = {c: figures.runs for c, figures in taken.items()}
        cycles = {c: figures.cycles for c, figures in taken.items()}
        floor_cycles = {c: figures.floor_cycles for c, figures in taken.items()}
        cycles[CLIENTS] = await measure_cycles(http, counts.cycles[CLIENTS], CLIENTS, stack)
        resumes = await measure_resumes(http, counts.cycles[16], 16, stack)
        history = await thread_history(stack.client, http, counts.history_runs)
        streams = await measure_streams(
            stack.client,
            stack.gateway_client,
            stack.reads,
            stack.settings,
            stack.bench_task_queue,
            counts.stream_runs,
        )
        tokens = await _tokens(stack, http, model_server, counts)
    return Results(
        floor, tool_floor, runs, cycles, floor_cycles, resumes, history, streams, tokens, growth
    )


async def _tokens(
    stack: Stack, http: httpx.AsyncClient, model_server: ChatServer, counts: Counts
) -> dict[float, Tokens]:
    """Streamed replies, by how long the model thinks before its first token."""
    return {
        0.0: await measure_tokens(
            http,
            model_server,
            stack.reads,
            stack.metrics_url,
            counts.token_replies,
            counts.tokens_per_reply,
        ),
        THINKING_SECONDS: await measure_tokens(
            http,
            model_server,
            stack.reads,
            stack.metrics_url,
            counts.thinking_replies,
            counts.tokens_per_reply,
            THINKING_SECONDS,
        ),
    }


async def growth_only(counts: Counts, payload_keys: SecretStr | None, versioned: bool) -> Growth:
    """One conversation's growth on the engine as deployed (``bench.deployed``, as
    ``make run`` runs it): the CPU of the dev server, the worker and the gateway, each
    read from ``/proc``, and the bench's client (this process) apart from them."""
    with tempfile.TemporaryDirectory(prefix="bench-growth-") as directory:
        async with deployed(
            Path(directory), 1, payload_keys=payload_keys, versioned=versioned
        ) as stack:
            secret = stack.settings.auth_hs256_secret
            assert secret is not None
            token = mint(secret.get_secret_value(), "bench", settings=stack.settings)
            async with httpx.AsyncClient(
                base_url=stack.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
            ) as http:
                await measure_runs(http, counts.warmup_runs, 1, counts.runs_per_thread)

                def cpu() -> dict[str, float]:
                    return {
                        "temporal": cpu_seconds(stack.server_pid),
                        "worker": cpu_seconds(stack.worker_pid),
                        "gateway": cpu_seconds(stack.gateway_pid),
                        CLIENT: time.process_time(),
                    }

                return await measure_growth(
                    stack.client, http, cpu, counts.growth_marks, counts.growth_window
                )


async def cycles_only(
    counts: Counts, payload_keys: SecretStr | None, versioned: bool
) -> tuple[dict[int, Cycles], dict[int, Cycles], CpuSplit]:
    """Interrupt cycles on fresh threads and the cycle's floor at c=16 and c=1, in
    alternating rounds, on a freshly started stack, nothing else; and the stack's CPU per
    second when idle."""
    async with (
        running_stack(EXAMPLES, payload_keys, versioned) as stack,
        _http(stack) as http,
    ):
        await measure_cycles(http, WARMUP_CYCLES, WARMUP_CYCLES, stack)
        idle = await idle_cpu(stack.server_pid, IDLE_SECONDS)
        taken: dict[int, list[Cycles]] = {16: [], 1: []}
        floors: dict[int, list[Cycles]] = {16: [], 1: []}
        for _ in range(ROUNDS):
            for c, batches in taken.items():
                batches.append(await measure_cycles(http, counts.cycles[c] // ROUNDS, c, stack))
                floors[c].append(await measure_floor_cycles(stack, counts.cycles[c] // ROUNDS, c))
        return (
            {c: Cycles.pooled(batches) for c, batches in taken.items()},
            {c: Cycles.pooled(batches) for c, batches in floors.items()},
            idle,
        )


async def main() -> None:
    """Parse the flags, bench, print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    parser.add_argument(
        "--codec",
        choices=["on", "off"],
        help="encrypt payloads with a fresh key (on) or not at all (off); by default as "
        "AGUI_PAYLOAD_KEYS says",
    )
    parser.add_argument(
        "--versioning",
        choices=["on", "off"],
        default="on",
        help="run the engine's worker as a build of a Worker Deployment (on, the default, "
        "as make run does), whose threads continue as new only to move to a new build, or "
        "unversioned (off), whose threads continue as new after every run",
    )
    parser.add_argument(
        "--only",
        choices=["growth", "cycles"],
        help="run one measurement alone: the conversation growth, or the interrupt cycles "
        "on fresh threads with their CPU",
    )
    args = parser.parse_args()
    counts = QUICK if args.quick else FULL
    versioned = args.versioning == "on"
    async with asyncio.timeout(DEADLINE_SECONDS):
        if args.only == "growth":
            table = render_growth(await growth_only(counts, _payload_keys(args.codec), versioned))
        elif args.only == "cycles":
            cycles, floors, idle = await cycles_only(counts, _payload_keys(args.codec), versioned)
            table = render_cpu(cycles, floors, idle=idle)
        else:
            table = render(await bench(counts, _payload_keys(args.codec), versioned))
    print(table, flush=True)


def _payload_keys(codec_flag: str | None) -> SecretStr | None:
    """The keys the bench encrypts with: a fresh one for ``--codec on`` (the bench's
    server is in memory, so nothing needs it afterwards), none for ``off``, else the
    environment's."""
    if codec_flag == "on":
        return SecretStr(f"bench:{codec.new_key()}")
    if codec_flag == "off":
        return None
    return Settings().payload_keys


if __name__ == "__main__":
    # On uvloop, as the worker and the gateway run in their own processes.
    uvloop.run(main())
    # Everything has stopped. Skip interpreter teardown, as worker.py does: the Temporal
    # core's native threads can outlive it and abort CPython's finalization.
    sys.stdout.flush()
    os._exit(0)
