"""When the gateway first reads a run in flight: ``stream_first_read_seconds`` after its
acceptance on an idle stack, later the longer the run waited to be accepted, never past
``FIRST_READ_MAX_SECONDS``."""

from __future__ import annotations

import pytest

from gateway.streaming import FIRST_READ_MAX_SECONDS, FIRST_READ_PER_ACCEPTANCE, first_read_seconds


@pytest.mark.parametrize("waited", [0.0, 0.001, 0.04])
def test_a_run_accepted_at_once_is_first_read_after_the_setting(waited: float) -> None:
    assert first_read_seconds(0.15, waited) == 0.15


def test_a_run_that_waited_to_be_accepted_is_first_read_that_much_later() -> None:
    assert first_read_seconds(0.15, 0.2) == pytest.approx(FIRST_READ_PER_ACCEPTANCE * 0.2)
    assert first_read_seconds(0.15, 0.3) > first_read_seconds(0.15, 0.2) > 0.15


@pytest.mark.parametrize("waited", [FIRST_READ_MAX_SECONDS, 30.0])
def test_however_long_a_run_waited_its_first_read_comes_within_the_cap(waited: float) -> None:
    assert first_read_seconds(0.15, waited) == FIRST_READ_MAX_SECONDS


def test_a_setting_above_the_cap_is_kept() -> None:
    assert first_read_seconds(5.0, 30.0) == 5.0
