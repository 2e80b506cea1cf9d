"""Round axis steps: the report's frames and the TUI plots' ticks read at a glance."""

from __future__ import annotations

import pytest

from gen_tui.backends.axes import ticks_past, ticks_within
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
