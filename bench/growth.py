"""Conversation growth: what a thread's later turns cost against its early ones.

Threads driven as a real client drives them (:class:`~bench.conversation.Conversation`:
the whole conversation and the state resent, the snapshots adopted); each turn is an
interrupt cycle: a run that pauses on one approval, then the resume that approves it. At
each mark it takes the history bytes of the workflow runs that served the turn
(:func:`~bench.history.served_runs`), and over a window of turns around it (one turn is
noisy) the resume's latency (``resume -> RUN_FINISHED``), that latency less the bench
client's own CPU over it, and the CPU each process spent per turn, as the caller reads
it: ``python -m bench`` on the engine as deployed (``bench/deployed.py``), each process
apart and the bench's client apart from them (:func:`measure_growth`); ``bench.pair
--turns`` against ``make run``'s processes.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from temporalio.client import Client

from bench.conversation import AGENT, Conversation
from bench.history import served_runs
from workflows.thread_ids import workflow_id_for

APPROVAL_PROMPT = "mail a@b.com"
"""What makes the demo agent ask for approval (``send_email``)."""
WINDOW = 20
"""Turns sampled around each mark: a process's CPU is read in clock ticks (10 ms), about
what it spends on a turn, and a turn's latency varies with the machine."""

AMORTIZED_TURNS = 40
"""The turns over which the longest conversation's history bytes are averaged with its
continues-as-new (:attr:`Growth.amortized`): under Worker Versioning a thread continues
as new about every 46 turns of this conversation (``workflows.thread.REPLAYED_EVENTS``),
so such a stretch holds one at most."""

CpuReader = Callable[[], dict[str, float]]
"""The CPU seconds each process of a stack has used so far, by the process's name."""
CLIENT = "client"
"""The name a :data:`CpuReader` gives the bench's own client, which is not the engine's."""


@dataclass(frozen=True)
class TurnCost:
    """One turn's figures."""

    resume_seconds: float
    resume_client_seconds: float
    """The bench client's own CPU over the resume (its thread's: writing the request,
    reading the stream), part of ``resume_seconds``."""
    cpu_seconds: dict[str, float]
    """By process."""
    history_bytes: int = 0


@dataclass(frozen=True)
class Mark:
    """The figures at one mark: the median latency and the mean CPU of the turns around
    it (CPU is read in clock ticks, too coarse for one turn), and the mark's own history
    bytes (the same in every run, so no sample is needed)."""

    turn: int
    resume_seconds: float
    resume_less_client_seconds: float
    """The median of each resume's latency less the bench client's own CPU over it: what
    the engine took of it. The client writes and reads the whole conversation (the
    request, the resume's two ``MESSAGES_SNAPSHOT`` events) in Python, so on a long
    thread its share of the latency grows most (``docs/bench.md``, "The resume without
    the client's share")."""
    cpu_seconds: dict[str, float]
    """By process."""
    history_bytes: int


@dataclass(frozen=True)
class Growth:
    """The marks of a conversation, first to last."""

    marks: tuple[Mark, ...]
    seconds: float
    """The wall time of the whole measurement."""
    amortized: tuple[float, float]
    """The history bytes per turn of the longest conversation's first and last
    :data:`AMORTIZED_TURNS` turns, its continues-as-new included: a mark's own turn
    carries its workflow run's continue-as-new only when it happens to be that run's
    last, so the marks alone do not show what a continue-as-new costs."""


async def _stream(
    http: httpx.AsyncClient, conversation: Conversation, body: dict[str, Any], agent: str
) -> Any:
    """Post a run to ``agent``, adopt its snapshots; its ``RUN_FINISHED`` event.

    Raises:
        RuntimeError: The run did not finish with ``RUN_FINISHED``.
    """
    async with http.stream("POST", f"/agents/{agent}", json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line.removeprefix("data:"))
            conversation.adopt(event)
            if event["type"] == "RUN_FINISHED":
                return event
    raise RuntimeError(f"the stream of {body['runId']} ended without RUN_FINISHED")


async def turn(
    http: httpx.AsyncClient,
    conversation: Conversation,
    cpu: CpuReader,
    agent: str = AGENT,
    prompt: str = APPROVAL_PROMPT,
) -> TurnCost:
    """One interrupt cycle on the conversation: ``prompt`` to ``agent``, a run that asks
    for approval, then the resume that approves it; its resume latency and the CPU it
    took.

    Raises:
        RuntimeError: The run did not pause, or the resume did not succeed.
    """
    before = cpu()
    paused = await _stream(http, conversation, conversation.next_input(prompt), agent)
    outcome = paused.get("outcome") or {}
    if outcome.get("type") != "interrupt":
        raise RuntimeError(f"turn {conversation.runs} did not pause: {paused}")
    resume = [
        {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        for interrupt in outcome["interrupts"]
    ]
    start, client_start = time.perf_counter(), time.thread_time()
    finished = await _stream(http, conversation, conversation.resume_input(resume), agent)
    latency, client = time.perf_counter() - start, time.thread_time() - client_start
    if finished.get("outcome") != {"type": "success"}:
        raise RuntimeError(f"the resume did not succeed: {finished}")
    after = cpu()
    return TurnCost(latency, client, {name: after[name] - before[name] for name in before})


def resume_rows(marks: Sequence[Mark]) -> list[tuple[str, list[float]]]:
    """The growth tables' resume rows, in ms at each of ``marks``: its p50, then that
    less the client's CPU (``make bench``'s table and ``bench.pair``'s print both)."""
    return [
        ("resume p50 ms", [mark.resume_seconds * 1000 for mark in marks]),
        ("  less the client's CPU", [mark.resume_less_client_seconds * 1000 for mark in marks]),
    ]


def window(mark: int, turns: int, width: int = WINDOW) -> range:
    """The turns (1-based) sampled for ``mark``: ``width`` turns around it, within
    turns 2 to ``turns`` (turn 1 also opens the thread)."""
    first = min(max(mark - width // 2, 2), turns - width + 1)
    return range(first, first + width)


def _mark(mark: int, costs: Sequence[TurnCost], width: int, turns: int) -> Mark:
    """The figures at ``mark`` of a conversation of ``turns`` turns whose first turns
    cost ``costs``, over the mark's window."""
    sample = [costs[number - 1] for number in window(mark, turns, width)]
    cpu = {
        name: statistics.mean(cost.cpu_seconds[name] for cost in sample)
        for name in sample[0].cpu_seconds
    }
    resume = statistics.median(cost.resume_seconds for cost in sample)
    engine = statistics.median(cost.resume_seconds - cost.resume_client_seconds for cost in sample)
    return Mark(mark, resume, engine, cpu, costs[mark - 1].history_bytes)


@dataclass(frozen=True)
class Side:
    """A stack whose conversations :func:`in_rounds` drives: its gateway, and how its
    processes' CPU is read."""

    http: httpx.AsyncClient
    cpu: CpuReader


@dataclass
class Driven:
    """A conversation :func:`in_rounds` drove, and what each of its turns cost."""

    conversation: Conversation = field(default_factory=Conversation)
    costs: list[TurnCost] = field(default_factory=list)


async def in_rounds(
    sides: Sequence[Side], marks: tuple[int, ...], width: int
) -> list[list[Driven]]:
    """For each side and each mark, a conversation of its own, driven to just before the
    mark's window (:func:`window`, in a conversation of ``max(marks)`` turns); then the
    windows' turns, taken in ``width`` rounds, one turn of each conversation in each, in
    an order that turns every round. By side, then by mark.

    The machine's speed drifts over a measurement (one conversation's marks taken one
    after the other gave ratios from 1.09x to 1.37x in three runs in a row,
    ``docs/bench.md``, "Conversation growth"); taken so, the drift touches every mark,
    and every side, alike, as it does the cycles' alternating rounds.

    Raises:
        RuntimeError: A turn failed.
    """
    windows = [window(mark, max(marks), width) for mark in marks]
    driven = [[Driven() for _ in marks] for _ in sides]
    for side, conversations in zip(sides, driven, strict=True):
        for each, turns in zip(conversations, windows, strict=True):
            while len(each.costs) < turns.start - 1:
                each.costs.append(await turn(side.http, each.conversation, side.cpu))
    taken = [
        (side, each)
        for side, conversations in zip(sides, driven, strict=True)
        for each in conversations
    ]
    for round_ in range(width):
        for index in _turned(len(taken), round_):
            side, each = taken[index]
            each.costs.append(await turn(side.http, each.conversation, side.cpu))
    return driven


async def measure_growth(
    client: Client, http: httpx.AsyncClient, cpu: CpuReader, marks: tuple[int, ...], width: int
) -> Growth:
    """The figures at each mark of a conversation of ``max(marks)`` turns, over ``width``
    turns around it, the CPU by process as ``cpu`` reads it (:func:`in_rounds`), and each
    mark's history bytes.

    Raises:
        RuntimeError: A turn failed, or a thread's history holds another number of runs
            than two a turn.
    """
    began = time.perf_counter()
    [driven] = await in_rounds([Side(http, cpu)], marks, width)
    taken = []
    for mark, each in zip(marks, driven, strict=True):
        weighed = await _with_history_bytes(client, each.conversation, each.costs)
        taken.append(_mark(mark, weighed, width, max(marks)))
    first, last = weighed[:AMORTIZED_TURNS], weighed[-AMORTIZED_TURNS:]
    amortized = (_bytes_per_turn(first), _bytes_per_turn(last))
    return Growth(tuple(taken), time.perf_counter() - began, amortized)


def _bytes_per_turn(costs: Sequence[TurnCost]) -> float:
    return sum(cost.history_bytes for cost in costs) / len(costs)


def marks_of(
    driven: Sequence[Driven], marks: tuple[int, ...], width: int = WINDOW
) -> tuple[Mark, ...]:
    """The figures at each mark of the conversations :func:`in_rounds` drove for one
    side (without history bytes, which :func:`measure_growth` reads)."""
    return tuple(
        _mark(mark, each.costs, width, max(marks)) for mark, each in zip(marks, driven, strict=True)
    )


def _turned(count: int, round_: int) -> list[int]:
    """``range(count)`` rotated by ``round_``: each index goes first in turn."""
    return [(round_ + offset) % count for offset in range(count)]


async def _with_history_bytes(
    client: Client, conversation: Conversation, costs: Sequence[TurnCost]
) -> list[TurnCost]:
    """``costs``, a conversation's turns in order, each with the history bytes its two
    runs added.

    Raises:
        RuntimeError: The thread's history holds another number of runs than two a turn.
    """
    served = (await served_runs(client, workflow_id_for(conversation.thread_id))).per_run
    if len(served) != 2 * len(costs):
        raise RuntimeError(f"{len(costs)} turns, but {len(served)} completed updates")
    return [
        dataclasses.replace(cost, history_bytes=pause.bytes + resume.bytes)
        for cost, pause, resume in zip(costs, served[::2], served[1::2], strict=True)
    ]
