"""The scale bench's cut of a run into ramp, steady state and tail (bench/phases.py).

A made-up run whose every phase is known: slots all busy 0.5 s after the first dispatch,
nothing on disk for 2 s, then 1,000 tokens a second, and a taper at half that rate for the
last 10% of the budget. The cut must give back each of those figures.
"""

from __future__ import annotations

import pytest

from bench.phases import Sample, cut

BUDGET, SLOTS, RATE = 100_000, 10, 1000.0
LAG, TAPER = 2.0, 0.9
"""Seconds before the first answers are on disk; the budget's share where the taper starts."""


def made_up_run() -> tuple[list[Sample], float]:
    """Samples every 0.05 s from the first dispatch (t=0) to the crossing, and the crossing."""
    taper_at = LAG + TAPER * BUDGET / RATE
    crossed = taper_at + (1 - TAPER) * BUDGET / (RATE / 2)
    samples = []
    for step in range(int(crossed / 0.05) + 1):
        at = step * 0.05
        if at < taper_at:
            tokens = max(0.0, at - LAG) * RATE
            running = SLOTS if at >= 0.5 else 4
        else:
            tokens = TAPER * BUDGET + (at - taper_at) * RATE / 2
            running = SLOTS / 2
        stranded = 1.0 if at < 1.0 else 0.0
        samples.append(Sample(at, int(tokens), running, stranded))
    return samples, crossed


def test_cut_gives_back_each_phase_of_a_known_run() -> None:
    samples, crossed = made_up_run()
    phases = cut(samples, 0.0, crossed, BUDGET, SLOTS)
    assert phases.to_budget_s == pytest.approx(crossed)
    assert phases.fill_s == pytest.approx(0.5)
    assert phases.steady_rate == pytest.approx(RATE, rel=0.01)
    assert phases.steady_full == pytest.approx(1.0)
    assert phases.ramp_s == pytest.approx(LAG, abs=0.06)
    # The last 10% took twice its time at the steady rate: 10 s beyond.
    assert phases.tail_s == pytest.approx((1 - TAPER) * BUDGET / RATE, abs=0.06)
    # One slot stranded for the first second, of `crossed` seconds of SLOTS slots.
    assert phases.stranded == pytest.approx(1.0 / (SLOTS * crossed), rel=0.06)


def test_a_run_whose_servers_never_said_their_load_has_no_occupancy() -> None:
    samples, crossed = made_up_run()
    silent = [Sample(s.at, s.tokens, None) for s in samples]
    phases = cut(silent, 0.0, crossed, BUDGET, SLOTS)
    assert phases.fill_s is None
    assert phases.steady_full is None
    assert phases.stranded is None
