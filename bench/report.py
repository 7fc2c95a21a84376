"""The bench's output: one compact plain-text table, the same on every run."""

from __future__ import annotations

from dataclasses import dataclass

from bench.cpu import CpuSplit
from bench.cycles import Cycles
from bench.growth import AMORTIZED_TURNS, CLIENT, Growth, resume_rows
from bench.history import HistoryGrowth
from bench.stats import Summary
from bench.streams import VariantResult
from bench.tokens import Tokens

NAME_WIDTH = 26


@dataclass(frozen=True)
class Results:
    """Everything ``python -m bench`` measured, by concurrency where it varies."""

    floor: dict[int, Summary]
    tool_floor: dict[int, Summary]
    """Updates that run a no-op local activity: Temporal's share of a resume with a tool."""
    runs: dict[int, Summary]
    cycles: dict[int, Cycles]
    """Interrupt cycles, each on a fresh thread, by concurrency."""
    floor_cycles: dict[int, Cycles]
    """The same cycles with Temporal's share alone (``bench.floor``), by concurrency."""
    resumes: Cycles
    """Resumes alone at c=16, on threads paused beforehand."""
    history: HistoryGrowth
    streams: list[VariantResult]
    tokens: dict[float, Tokens]
    """By how long the model thought before its first token, in seconds."""
    growth: Growth


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def _kb(size: float) -> str:
    return f"{size / 1024:.1f} KB"


def _latency_row(name: str, summary: Summary) -> str:
    return (
        f"  {name:<{NAME_WIDTH}}{summary.count:>5}"
        f"{_ms(summary.percentile(50))}{_ms(summary.percentile(95))}"
        f"{_ms(summary.percentile(99))}{summary.rate:9.1f}"
    )


def render(results: Results) -> str:
    """The table: latencies in milliseconds, rates per second, history per run."""
    head = f"  {'':<{NAME_WIDTH}}{'n':>5}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'per s':>9}"
    lines = [
        "Raw floors: Temporal update round trips, same server, one client",
        f"{head}{'p50/update':>11}{'rate/update':>12}",
    ]
    lines += [_latency_row(f"update c={c}", s) for c, s in results.floor.items()]
    for concurrency, tool in results.tool_floor.items():
        floor = results.floor[concurrency]
        lines.append(
            f"{_latency_row(f'update + local act. c={concurrency}', tool)}"
            f"{tool.percentile(50) / floor.percentile(50):>10.1f}x{tool.rate / floor.rate:>11.0%}"
        )
    lines += [
        "",
        "AG-UI run over HTTP: POST /agents/demo -> RUN_FINISHED read from SSE",
        f"{head}{'p50/floor':>11}{'rate/floor':>12}",
    ]
    for concurrency, runs in results.runs.items():
        floor = results.floor[concurrency]
        latency_ratio = runs.percentile(50) / floor.percentile(50)
        rate_share = runs.rate / floor.rate
        lines.append(
            f"{_latency_row(f'run c={concurrency}', runs)}"
            f"{latency_ratio:>10.1f}x{rate_share:>11.0%}"
        )
    c1_floor = results.floor[1].percentile(50)
    c1_tool = results.tool_floor[1].percentile(50)
    raw_rate = max(floor.rate for floor in results.floor.values())

    def resume_row(name: str, summary: Summary) -> str:
        p50 = summary.percentile(50)
        return (
            f"{_latency_row(name, summary)}{p50 / c1_floor:>10.1f}x"
            f"{summary.rate / raw_rate:>11.0%}{p50 / c1_tool:>10.1f}x"
        )

    lines += [
        "",
        "Interrupt cycle: run -> interrupt -> resume; latency of resume -> RUN_FINISHED",
        f"{head}{'p50/floor':>11}{'cycles/raw':>12}{'p50/+act.':>11}",
    ]
    lines += [resume_row(f"resume c={c}", cycles.summary) for c, cycles in results.cycles.items()]
    lines.append(resume_row("resume only c=16", results.resumes.summary))
    lines += ["", render_cpu(results.cycles, results.floor_cycles, results.resumes)]
    history = results.history
    runs_count = len(history.per_run)
    lines += [
        "",
        f"History of one thread's {runs_count} runs via the gateway, each in the workflow run "
        "that served it",
        f"  {sum(s.events for s in history.per_run)} events, "
        f"{_kb(sum(s.bytes for s in history.per_run))}: "
        f"{history.events_per_run:.1f} events/run, {_kb(history.bytes_per_run)}/run "
        f"(run 1: {_kb(history.per_run[0].bytes)}, "
        f"run {runs_count}: {_kb(history.per_run[-1].bytes)})",
        "",
        "Streaming a run (10 events, 1 activity) to its client, on an existing workflow",
        f"  {'':<{NAME_WIDTH}}{'n':>5}{'first p50':>10}{'last p50':>9}{'last p95':>9}"
        f"{'last p99':>9}{'events/run':>11}{'bytes/run':>10}{'queries/s':>10}",
    ]
    for variant in results.streams:
        lines.append(
            f"  {variant.name:<{NAME_WIDTH}}{variant.last.count:>5}"
            f"{_ms(variant.first.percentile(50)):>10}{_ms(variant.last.percentile(50)):>9}"
            f"{_ms(variant.last.percentile(95)):>9}{_ms(variant.last.percentile(99)):>9}"
            f"{variant.history.events_per_run:>11.1f}{variant.history.bytes_per_run:>10.0f}"
            f"{variant.cost.queries_per_second:>10.1f}"
        )
    lines += [
        "",
        "Model tokens: leaving an OpenAI-compatible server -> TEXT_MESSAGE_CONTENT at the client;",
        "the gateway's reads per second per open stream (queries, history long polls); the",
        "dev server's workflow tasks per reply",
        f"{head}{'queries/s':>10}{'polls/s':>8}{'wf tasks':>10}",
    ]
    for thinking, tokens in results.tokens.items():
        name = f"token delay, {thinking:g} s thinking" if thinking else "token delay"
        lines += [
            f"{_latency_row(name, tokens.delays)}{tokens.cost.queries_per_second:>10.1f}"
            f"{tokens.cost.history_per_second:>8.1f}{tokens.work.workflow_tasks:>10.1f}",
            _latency_row("  its first tokens", tokens.first),
        ]
    lines += ["", render_growth(results.growth)]
    return "\n".join(lines)


def render_cpu(
    cycles: dict[int, Cycles],
    floors: dict[int, Cycles],
    resumes: Cycles | None = None,
    idle: CpuSplit | None = None,
) -> str:
    """The stack's CPU per interrupt cycle, by process, with the cycles' rate; the same
    for the cycle's floor, Temporal's share alone (``floors``); per resume for
    ``resumes``; per second with nothing sent for ``idle``. ``queries`` and ``polls`` are
    the gateway's reads per cycle (:mod:`bench.reads`)."""
    lines = [
        "CPU per interrupt cycle on a fresh thread: dev server + this process (engine worker,",
        "gateway and the bench's clients)",
        f"  {'':<{NAME_WIDTH}}{'n':>5}{'per s':>9}{'p50 ms':>8}"
        f"{'server ms':>11}{'process ms':>11}{'total ms':>10}{'queries':>9}{'polls':>7}",
    ]

    def row(name: str, taken: Cycles) -> str:
        each, count = taken.cpu_each, taken.summary.count
        return (
            f"  {name:<{NAME_WIDTH}}{taken.summary.count:>5}{taken.summary.rate:9.1f}"
            f"{_ms(taken.summary.percentile(50))}"
            f"{each.server * 1000:11.1f}{each.bench * 1000:11.1f}{each.total * 1000:10.1f}"
            f"{taken.reads.queries / count:9.2f}{taken.reads.history / count:7.2f}"
        )

    named = [(f"cycle c={c}", taken) for c, taken in cycles.items()]
    named += [(f"floor cycle c={c}", taken) for c, taken in floors.items()]
    if resumes is not None:
        named.append(("resume only c=16", resumes))
    lines += [row(name, taken) for name, taken in named]
    if idle is not None:
        lines.append(
            f"  {'idle, per second':<{NAME_WIDTH}}{'':>22}"
            f"{idle.server * 1000:11.1f}{idle.bench * 1000:11.1f}{idle.total * 1000:10.1f}"
        )
    lines += [
        "The same, what the dev server did per cycle (its own counters): workflow tasks, "
        "activity tasks,",
        "writes of a workflow's state, writes of its visibility record, queries",
        f"  {'':<{NAME_WIDTH}}{'wf tasks':>10}{'activities':>11}{'state':>8}"
        f"{'visibility':>11}{'queries':>9}",
    ]
    for name, taken in named:
        work = taken.work.per(taken.summary.count)
        lines.append(
            f"  {name:<{NAME_WIDTH}}{work.workflow_tasks:10.2f}{work.activity_tasks:11.2f}"
            f"{work.state_writes:8.2f}{work.visibility_writes:11.2f}{work.queries:9.2f}"
        )
    return "\n".join(lines)


def ordinal(number: int) -> str:
    """``2nd``, ``20th``, ``200th``: the growth table's ratio header."""
    suffixes = {1: "st", 2: "nd", 3: "rd"}
    suffix = "th" if number % 100 in (11, 12, 13) else suffixes.get(number % 10, "th")
    return f"{number}{suffix}"


def render_growth(growth: Growth) -> str:
    """A conversation's cost at each mark, and its last mark against its first."""
    first, last = growth.marks[0], growth.marks[-1]
    columns = "".join(f"{f'turn {mark.turn}':>10}" for mark in growth.marks)
    ratio = f"{ordinal(last.turn)}/{ordinal(first.turn)}"
    lines = [
        "Conversation growth: a thread, each turn an interrupt cycle, the conversation "
        f"resent; the marks' windows in rounds ({growth.seconds:.0f} s)",
        f"  {'':<{NAME_WIDTH}}{columns}{ratio:>12}",
    ]
    ours = [
        sum(cpu for name, cpu in mark.cpu_seconds.items() if name != CLIENT) * 1000
        for mark in growth.marks
    ]
    rows = [
        *resume_rows(growth.marks),
        ("history KB/turn", [mark.history_bytes / 1024 for mark in growth.marks]),
        ("CPU ms/turn, the engine", ours),
    ]
    rows += [
        (
            f"  {name}" if name != CLIENT else "CPU ms/turn, bench client",
            [mark.cpu_seconds[name] * 1000 for mark in growth.marks],
        )
        for name in growth.marks[0].cpu_seconds
    ]
    for name, values in rows:
        cells = "".join(f"{value:10.1f}" for value in values)
        lines.append(f"  {name:<{NAME_WIDTH}}{cells}{values[-1] / values[0]:>11.2f}x")
    early, late = growth.amortized
    lines.append(
        f"  history KB/turn with the continues-as-new, the first and the last {AMORTIZED_TURNS} "
        f"turns: {early / 1024:.1f} and {late / 1024:.1f} ({late / early:.2f}x)"
    )
    return "\n".join(lines)
