"""The watched panels' rate (`RateMeter`): steady for a slow writer, quick for a fast one.

The demo's B9 writes one ~3k-token record about once a minute; over a bare 30 s window its
panel's rate jumped between 0 and ~101 tok/s while its server said a steady 50 tok/s.
"""

from __future__ import annotations

import random

import pytest

from gen_tui.backends.hosts.monitor import RateMeter


@pytest.mark.parametrize("every_reading", [True, False])
def test_one_record_a_minute_reads_a_steady_rate_near_its_own(every_reading: bool) -> None:
    """3,000 tokens every 55 to 65 s (50 tok/s), looked at every 2 s for an hour, the totals
    given at every look or only when they change: once four records are in, every reading
    is within 20% of 50 tok/s (before: 0 or ~100)."""
    rng = random.Random(9)
    meter = RateMeter()
    tokens = samples = 0
    next_record = 60.0
    seen: list[float] = []
    records = 0
    for tick in range(1800):
        now = tick * 2.0
        if now >= next_record:
            tokens += 3000
            samples += 1
            records += 1
            next_record += rng.uniform(55.0, 65.0)
            meter.add(now, tokens, samples)
        elif every_reading or tick == 0:
            meter.add(now, tokens, samples)
        if records >= 4:
            seen.append(meter.rates(now)[0])
    assert min(seen) >= 40.0 and max(seen) <= 60.0, (min(seen), max(seen))
    assert 45.0 <= sum(seen) / len(seen) <= 55.0
    assert 40.0 <= meter.last_tok_s <= 60.0

    # It stops: the rate decays to zero, not held.
    stop = 1800 * 2.0
    later = [meter.rates(stop + minutes * 60.0)[0] for minutes in (2, 5, 10, 30)]
    assert later == sorted(later, reverse=True) and later[-1] < 5.0, later


def test_a_fast_writer_shows_a_change_of_rate_within_the_window() -> None:
    """1,000 tok/s read every 0.5 s for a minute, then 2,000 tok/s: halfway through the next
    30 s window the rate is between the two, and at its end it is the new one."""
    meter = RateMeter()
    tokens = 0
    now = 0.0
    while now < 60.0:
        now += 0.5
        tokens += 500
        meter.add(now, tokens, 0)
    assert abs(meter.rates(now)[0] - 1000.0) < 20.0
    change = now
    readings = {}
    while now < change + 30.0:
        now += 0.5
        tokens += 1000
        meter.add(now, tokens, 0)
        readings[now - change] = meter.rates(now)[0]
    assert 1400.0 < readings[15.0] < 1600.0, readings[15.0]
    assert abs(readings[30.0] - 2000.0) < 40.0, readings[30.0]
    # Nothing new for 15 s: the rate falls at once (by a third), as a stop should show.
    assert meter.rates(now + 15.0)[0] < 1400.0
