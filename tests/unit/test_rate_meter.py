"""A dataset's rate, the watched panels' (`RateMeter`) and the engine's (`DatasetRun`):
steady for a slow writer, quick for a fast one.

The demo's B9 writes one ~3k-token record about once a minute; over a bare 30 s window its
panel's rate jumped between 0 and ~101 tok/s while its server said a steady 50 tok/s.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gen_tui.backends.config.run import DatasetSpec
from gen_tui.backends.engine import dataset as engine_dataset_module
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.progress.rate import RateMeter


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


class Clock:
    """time.monotonic for the engine's dataset: set by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def engine_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[DatasetRun, Clock]:
    clock = Clock()
    monkeypatch.setattr(engine_dataset_module.time, "monotonic", clock)
    spec = DatasetSpec("B9", tmp_path / "B9.jsonl")
    return DatasetRun(spec, tmp_path / "B9", 4000.0), clock


def test_the_engines_rate_of_one_record_a_minute_is_steady(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same writer in a `gen-tui run` (its own 60 s window of records): once four
    records are in, 40-60 tok/s at every look (before: 0, 50 or 100); stalled for a few
    minutes, 0."""
    ds, clock = engine_dataset(tmp_path, monkeypatch)
    rng = random.Random(9)
    next_record = 60.0
    seen: list[float] = []
    for tick in range(1800):
        clock.now = tick * 2.0
        if clock.now >= next_record:
            ds.record(f"s{tick}", 3000, None)
            next_record += rng.uniform(55.0, 65.0)
        if ds.samples >= 4:
            seen.append(ds.rates(clock.now)[0])
    assert min(seen) >= 40.0 and max(seen) <= 60.0, (min(seen), max(seen))
    assert 0.6 < ds.rates(clock.now)[1] * 60 < 1.2  # about one sample a minute
    assert ds.rates(clock.now + 200.0) == (0.0, 0.0)


def test_the_engines_fast_dataset_keeps_its_60_s_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 records of 100 tokens a second, then 200: 30 s after the change the rate is
    between the two, 60 s after it the new one; 61 s after the last record, 0."""
    ds, clock = engine_dataset(tmp_path, monkeypatch)
    for tick in range(120 * 10):
        clock.now = tick / 10
        for index in range(10 if tick < 600 else 20):
            ds.record(f"s{tick}.{index}", 100, None)
        if tick == 599:
            assert abs(ds.rates(clock.now)[0] - 10_000.0) < 200.0
        if tick == 899:
            assert 14_000.0 < ds.rates(clock.now)[0] < 16_000.0
    assert abs(ds.rates(clock.now)[0] - 20_000.0) < 400.0
    assert ds.rates(clock.now + 61.0) == (0.0, 0.0)


def test_one_rule_for_the_engine_and_the_panels_first_record_and_stop() -> None:
    """The shared rule itself (`progress.rate`), as both the engine (60 s) and the panels
    (30 s) use it: a first record after a start reads its own rate; records every 10 s read
    their rate exactly; late by less than one mean step it holds, later it decays; past two
    mean steps and the window it is exactly 0 (the engine's, `stops`; the panels' decays); a
    replaced file starts over."""
    meter = RateMeter(window_s=60.0, stops=True)
    assert meter.rates(5.0) == (0.0, 0.0)
    meter.add(0.0, 0, 0)  # the start: no record yet
    meter.add(20.0, 2000, 1)
    assert meter.rates(20.0) == (100.0, 0.05)  # 2,000 tokens 20 s after the start
    for record in range(2, 8):
        meter.add(20.0 + 10 * (record - 1), 2000 * record, record)
    last = 80.0
    assert meter.rates(last) == (200.0, 0.1)  # 2,000 tokens every 10 s
    assert meter.rates(last + 9.0) == (200.0, 0.1)  # within one mean step: held
    decaying = [meter.rates(last + late)[0] for late in (15.0, 30.0, 59.0)]
    assert decaying == sorted(decaying, reverse=True) and 0.0 < decaying[-1] < 200.0
    assert meter.rates(last + 61.0) == (0.0, 0.0)
    assert meter.last_tok_s == 200.0
    meter.stops = False  # the watched panels' meter: it decays, never cut to 0
    assert 0.0 < meter.rates(last + 61.0)[0] < decaying[-1]
    meter.add(200.0, 100, 1)  # replaced: 100 < 14,000
    meter.add(201.0, 300, 2)
    assert meter.rates(201.0) == (200.0, 1.0)
