"""Round axis steps, one rule for every chart (the TUI's history plots and the HTML report).

A reader takes in an axis at 0, 50k, 100k at a glance; 0, 62.16k, 124.32k (quarters of the
top value, a plotting library's default) has to be read tick by tick.
"""

from __future__ import annotations

import math
import time

STEP_FACTORS = (1, 2, 2.5, 5)
"""A round step is one of these times a power of ten."""


def round_step(high: float, most: int) -> float:
    """The smallest round step that covers 0..`high` in at most `most` steps (`high` > 0)."""
    power = 10.0 ** math.floor(math.log10(high / most))
    for step in (m * power * scale for scale in (1, 10) for m in STEP_FACTORS):
        if math.ceil(high / step * (1 - 1e-9)) <= most:
            return step
    raise AssertionError("ten times the power always fits")  # pragma: no cover


def ticks_past(high: float, steps: int = 4) -> list[float]:
    """Ticks from 0 to the first round one at or past `high` (a chart's frame), at most
    `steps` + 1 of them."""
    if high <= 0:
        return [0.0, 1.0]
    step = round_step(high, steps + 1)
    return [step * i for i in range(math.ceil(high / step * (1 - 1e-9)) + 1)]


def ticks_within(high: float, steps: int = 4) -> list[float]:
    """Ticks from 0 up to `high` and not past it (an axis whose frame is set apart)."""
    if high <= 0:
        return [0.0]
    step = round_step(high, steps)
    return [step * i for i in range(int(high / step * (1 + 1e-9)) + 1)]


CLOCK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)
"""Round steps of a time axis in seconds (past the last one: whole days)."""


def clock_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Unix times between `low` and `high` at a round local step (19:30:00, 19:30:15, ...;
    not 19:29:49, 19:30:14: quarters of the span), at most `most` of them and at least one.

    Local: a tick at a whole hour is one on the reader's clock, whatever their UTC offset.
    """
    if not high > low:
        return [low]
    span = high - low
    step = next((s for s in CLOCK_STEPS if span / s <= most - 1), None)
    if step is None:
        step = 86400 * math.ceil(span / 86400 / (most - 1))
    offset = time.localtime(low).tm_gmtoff
    first = float(math.ceil((low + offset) / step) * step - offset)
    ticks = [first + step * i for i in range(int((high - first) / step) + 1)]
    return ticks or [low]
