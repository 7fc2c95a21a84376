"""``python -m bench.sitting [--duration S] [--warmup S] [--fresh]``: one side-by-side
sitting, the engine, the peer and the cycle's floor read by one client.

``bash ../shared/peers/side_by_side.sh`` reads the engine (``make run``) and the peer
(LangGraph with ``ag-ui-langgraph``) with one generic AG-UI client. The floor
(``python -m bench.floor_server``) is what any engine whose cycle has this shape on
Temporal spends at least. This runs the script, then serves the floor and runs the same
client at it, in the same scenarios (fresh threads and one growing thread per client, at
c=1 and c=16) for as long, and prints the three against each other (``docs/bench.md``,
"The floor against the peer"). This machine's speed drifts between sittings by more than
most changes, so only the ratios within one sitting compare.

The script runs ``make run`` on this checkout's ``.data``; ``--fresh`` deletes it first
(and with it the threads kept there), since moving an earlier build's threads at start
would be measured too ("Start from a fresh .data when comparing builds").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.deployed import ROOT
from bench.floor_server import Announcement
from bench.stack import free_port

PEERS = ROOT.parent / "shared" / "peers"
"""The peer and its client (``../shared/peers/README.md``)."""
SCENARIOS = (("fresh", 1), ("fresh", 16), ("same", 1), ("same", 16))
"""The side-by-side script's: a thread per cycle, or one growing thread per client,
each at concurrency 1 and 16."""
STOP_SECONDS = 60.0
"""How long the floor server may take to stop its processes."""

Row = dict[str, Any]
"""One scenario's summary, as the side-by-side client prints it (its last line)."""
Rows = dict[tuple[str, int], Row]
"""Summaries by scenario: ``fresh`` or ``same`` (one growing thread per client), and the
concurrency."""


def client_argv(
    python: str,
    floor: Announcement,
    mode: str,
    concurrency: int,
    duration: float,
    warmup: float,
) -> list[str]:
    """The side-by-side client's command line for one scenario, as the script runs it
    (without the engine's token, which the floor does not ask for), reading the CPU of
    the ``floor``'s processes."""
    argv = [
        python,
        str(PEERS / "bench.py"),
        *("--url", floor.url, "--message", "email a@b.com"),
        *("--concurrency", str(concurrency), "--duration", str(duration)),
        *("--warmup", str(warmup), "--label", f"floor {mode}-c{concurrency}"),
        *(arg for pid in floor.pids for arg in ("--server-pid", str(pid))),
    ]
    return [*argv, "--same-thread"] if mode == "same" else argv


def rows(lines: Iterable[str]) -> Rows:
    """The client's summaries among ``lines``, by scenario (``mode``, concurrency):
    the ``mode`` the client reports is ``fresh-thread`` or ``same-thread``."""
    found: Rows = {}
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("kind") == "summary":
            found[(str(row["mode"]).removesuffix("-thread"), int(row["concurrency"]))] = row
    return found


def table(ours: Rows, floor: Rows, peer: Rows) -> str:
    """The sitting as a Markdown table: each scenario's cycles per second as ratios, the
    CPU milliseconds per cycle of all of each one's processes, the resume's p50, and the
    errors each saw. What a side lacks (a scenario whose client failed) reads ``-``."""

    def rate(row: Row | None) -> float | None:
        return row.get("cycles_per_s") if row else None

    def ratio(a: Row | None, b: Row | None) -> str:
        x, y = rate(a), rate(b)
        return f"{x / y:.2f}" if x is not None and y else "-"

    def each(key: str, *found: Row | None, inner: str | None = None) -> str:
        values = []
        for row in found:
            value = row.get(key) if row else None
            if inner is not None and isinstance(value, dict):
                value = value.get(inner)
            values.append("-" if value is None else f"{value:g}")
        return " / ".join(values)

    lines = [
        "| scenario | ours / peer | floor / peer | ours / floor | cycles/s: ours / floor / peer"
        " | CPU ms per cycle | resume p50 ms | errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode, concurrency in SCENARIOS:
        key = (mode, concurrency)
        o, f, p = ours.get(key), floor.get(key), peer.get(key)
        name = f"{'fresh' if mode == 'fresh' else 'growing'} thread, c={concurrency}"
        lines.append(
            f"| {name} | {ratio(o, p)} | {ratio(f, p)} | {ratio(o, f)}"
            f" | {each('cycles_per_s', o, f, p)}"
            f" | {each('server_cpu_ms_per_cycle', o, f, p)}"
            f" | {each('resume_to_finished_ms', o, f, p, inner='p50')}"
            f" | {each('errors', o, f, p)} |"
        )
    return "\n".join(lines)


def side_by_side(out: Path, duration: float, warmup: float) -> None:
    """``side_by_side.sh``, its results under ``out`` and its own table echoed.

    Raises:
        RuntimeError: The script failed; its output says why.
    """
    env = os.environ | {"OUT": str(out), "DURATION": f"{duration:g}", "WARMUP": f"{warmup:g}"}
    done = subprocess.run(
        ["bash", str(PEERS / "side_by_side.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    print(done.stdout, end="", file=sys.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"side_by_side.sh failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")


def floor_rows(python: str, duration: float, warmup: float) -> Rows:
    """The client's scenarios against a floor server of its own, stopped after them."""
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.floor_server", "--port", str(free_port())],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    try:
        floor = Announcement.parse(server.stdout.readline())
        measured: list[str] = []
        for mode, concurrency in SCENARIOS:
            argv = client_argv(python, floor, mode, concurrency, duration, warmup)
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            measured += done.stdout.splitlines()[-1:]
        return rows(measured)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(STOP_SECONDS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before each")
    parser.add_argument("--fresh", action="store_true", help="delete .data first")
    parser.add_argument("--out", type=Path, help="where to keep the JSON lines")
    args = parser.parse_args()
    python = str(Path(os.environ.get("PEER_DIR", "/tmp/peer")) / "venv" / "bin" / "python")
    out = args.out or Path(tempfile.mkdtemp(prefix="sitting-"))
    if args.fresh:
        shutil.rmtree(ROOT / ".data", ignore_errors=True)
    side_by_side(out, args.duration, args.warmup)
    floor = floor_rows(python, args.duration, args.warmup)
    (out / "floor.jsonl").write_text("".join(json.dumps(row) + "\n" for row in floor.values()))
    ours = rows((out / "ours.jsonl").read_text().splitlines())
    peer = rows((out / "peer" / "peer_summary.jsonl").read_text().splitlines())
    print(table(ours, floor, peer))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
