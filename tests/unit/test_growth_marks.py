"""A growth mark's figures from its window's turns (``bench/growth.py``): the resume's
latency less the client's share is taken resume by resume, so a slow client on one
resume and a slow engine on another do not cancel out."""

from __future__ import annotations

import pytest

from bench.growth import Driven, TurnCost, marks_of


def _cost(resume: float, client: float) -> TurnCost:
    return TurnCost(resume, client, {"worker": 0.02, "client": client})


def test_the_engine_s_share_is_the_median_of_each_resume_less_the_client_s_cpu() -> None:
    # Turn 1 opens the thread and is outside every window; a mark's window is turns 2-4.
    costs = [_cost(1.0, 0.0), _cost(0.050, 0.001), _cost(0.090, 0.040), _cost(0.070, 0.002)]
    [mark] = marks_of([Driven(costs=costs)], (4,), width=3)
    assert mark.turn == 4
    assert mark.resume_seconds == pytest.approx(0.070)
    # Each resume less its client's CPU: 0.049, 0.050, 0.068; the medians' difference
    # would be 0.070 - 0.002 = 0.068.
    assert mark.resume_less_client_seconds == pytest.approx(0.050)
    assert mark.cpu_seconds["client"] == pytest.approx((0.001 + 0.040 + 0.002) / 3)
