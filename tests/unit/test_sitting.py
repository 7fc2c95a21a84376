"""A side-by-side sitting's table (``bench/sitting.py``): the client's summaries read from
its output, the floor server's announcement read as it is written, and the three
compared scenario by scenario."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.floor_server import Announcement
from bench.sitting import client_argv, rows, table


def _summary(mode: str, concurrency: int, rate: float, cpu: float, p50: float) -> str:
    row: dict[str, Any] = {
        "kind": "summary",
        "mode": f"{mode}-thread",
        "concurrency": concurrency,
        "cycles_per_s": rate,
        "server_cpu_ms_per_cycle": cpu,
        "resume_to_finished_ms": {"p50": p50, "p95": p50 * 2},
        "errors": 0,
    }
    return json.dumps(row)


def test_the_announcement_reads_back_as_written() -> None:
    said = Announcement(
        "http://127.0.0.1:8200/agents/floor",
        "127.0.0.1:40001",
        "http://127.0.0.1:40002/metrics",
        (11, 12, 13),
    )
    assert Announcement.parse(said.line() + "\n") == said
    with pytest.raises(ValueError, match="not the floor server's announcement"):
        Announcement.parse("Traceback (most recent call last):\n")


def test_only_the_client_s_summaries_are_read_by_scenario() -> None:
    lines = [
        "warming up",
        json.dumps({"kind": "cycle", "mode": "fresh-thread", "concurrency": 1}),
        _summary("fresh", 1, 10.0, 100.0, 40.0),
        _summary("same", 16, 20.0, 50.0, 300.0),
    ]
    found = rows(lines)
    assert sorted(found) == [("fresh", 1), ("same", 16)]
    assert found[("same", 16)]["cycles_per_s"] == 20.0


def test_each_scenario_compares_the_three_and_a_missing_one_reads_as_such() -> None:
    ours = rows([_summary("fresh", 1, 8.0, 150.0, 76.5)])
    floor = rows([_summary("fresh", 1, 16.0, 80.0, 40.0), _summary("same", 16, 25.0, 60.0, 400.0)])
    peer = rows([_summary("fresh", 1, 10.0, 70.0, 35.0), _summary("same", 16, 10.0, 90.0, 600.0)])
    lines = table(ours, floor, peer).splitlines()
    fresh = next(line for line in lines if line.startswith("| fresh thread, c=1 |"))
    assert fresh == (
        "| fresh thread, c=1 | 0.80 | 1.60 | 0.50 | 8 / 16 / 10 | 150 / 80 / 70"
        " | 76.5 / 40 / 35 | 0 / 0 / 0 |"
    )
    growing = next(line for line in lines if line.startswith("| growing thread, c=16 |"))
    assert growing.split(" | ")[1:4] == ["-", "2.50", "-"]
    assert len(lines) == 2 + 4


def test_the_client_grows_one_thread_only_in_the_growing_scenarios() -> None:
    floor = Announcement("http://floor", "127.0.0.1:40001", "http://metrics", (11, 12, 13))
    fresh = client_argv("python", floor, "fresh", 16, 10.0, 3.0)
    same = client_argv("python", floor, "same", 16, 10.0, 3.0)
    assert "--same-thread" not in fresh
    assert same[-1] == "--same-thread"
    assert len(same) == len(fresh) + 1
    assert fresh[fresh.index("--concurrency") + 1] == "16"
