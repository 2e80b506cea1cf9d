"""Round axis steps: the report's frames and the TUI plots' ticks read at a glance."""

from __future__ import annotations

import itertools
import time

import pytest

from gen_tui.backends.axes import clock_ticks, ticks_past, ticks_within
from gen_tui.backends.store.history import HistoryPoint
from gen_tui.backends.store.history_series import DatasetHistory, TimeAxis


@pytest.mark.parametrize(
    ("high", "ticks"),
    [
        (248_640, [0, 50_000, 100_000, 150_000, 200_000, 250_000]),
        (10_000_000, [0, 2_000_000, 4_000_000, 6_000_000, 8_000_000, 10_000_000]),
        (10_002_535, [0, 2_500_000, 5_000_000, 7_500_000, 10_000_000, 12_500_000]),
        (3.2, [0, 1, 2, 3, 4]),
        (999, [0, 200, 400, 600, 800, 1000]),
    ],
)
def test_a_frame_ends_on_the_first_round_tick_past_the_top(high: float, ticks: list[float]) -> None:
    got = ticks_past(high)
    assert got == pytest.approx(ticks)
    assert got[-1] >= high * (1 - 1e-9) and len(got) <= 6


@pytest.mark.parametrize(
    ("high", "ticks"),
    [
        (1_000_000, [0, 250_000, 500_000, 750_000, 1_000_000]),
        (3026, [0, 1000, 2000, 3000]),
        (67.0, [0, 20, 40, 60]),
        (0.9, [0, 0.25, 0.5, 0.75]),
    ],
)
def test_ticks_within_stop_at_the_top(high: float, ticks: list[float]) -> None:
    assert ticks_within(high) == pytest.approx(ticks)


def point(t: float) -> HistoryPoint:
    return HistoryPoint(t, 1, "active", 0, 0, 0.0, 0, 0)


@pytest.mark.parametrize(
    ("span", "labels"),
    [
        (67.0, ["0", "20", "40", "60"]),
        (8 * 3600.0, ["0", "2", "4", "6", "8"]),
        (100 * 60.0, ["0", "20", "40", "60", "80", "100"]),
    ],
)
def test_the_time_axis_ticks_at_round_times_in_its_unit(span: float, labels: list[str]) -> None:
    axis = TimeAxis.over([DatasetHistory("A", (point(1e9), point(1e9 + span)))])
    values, said = axis.ticks()
    assert said == labels
    assert values[-1] * axis.per <= span


def test_a_time_axis_ticks_at_round_local_times() -> None:
    """Issue 31: the report's time axis ticked at 19:29:49, 19:30:14, 19:30:40 (quarters of
    the span); now at a round step of the reader's clock."""
    low = time.mktime((2026, 12, 4, 19, 29, 49, 0, 0, -1)) + 0.3
    ticks = clock_ticks(low, low + 51.4)
    assert [time.strftime("%H:%M:%S", time.localtime(t)) for t in ticks] == [
        "19:30:00",
        "19:30:15",
        "19:30:30",
    ]
    night = clock_ticks(low, low + 9 * 3600)
    assert all(time.localtime(t)[4:6] == (0, 0) for t in night), "whole hours"
    assert 2 <= len(night) <= 6 and len({b - a for a, b in itertools.pairwise(night)}) == 1
    assert clock_ticks(low, low) == [low]
