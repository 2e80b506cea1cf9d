"""The engine hands the planner each lane's rate trend (issue 34): the slope of the rates
it measured over the last minutes, none before they span two, and a lane slowing down is
planned to go on slowing (it delivers less by the deadline than its rate now says)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine.context import RunContext
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.fleet import TREND_WINDOW_S, FleetPlanner, rate_trend
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.engine.runner import Server
from gen_tui.backends.engine.signals import RunSignals
from gen_tui.backends.plan import Lane


def lone_box(tmp_path: Path, lane: str = "box=http://box:1") -> tuple[FleetPlanner, Server]:
    """A planner over one free lane, `lane`, whose server the test sets figures on."""
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=1_000_000)], lanes=[lane]
    )
    run = RunContext(config, [], RunSignals(), Reporter(None, None, lambda: None, None))
    box = Server("http://box:1", limit=64 if "concurrency=64" in lane else None)
    runner: Any = SimpleNamespace(servers=[box], on_stall=None)
    return FleetPlanner(run, runner, CostMeter(config, [])), box


def test_the_slope_of_the_recent_rates() -> None:
    line = [(t, 1_000 - 2.0 * t) for t in range(0, 301, 60)]
    assert rate_trend(line, now=300) == pytest.approx(-2.0)
    # Older samples than the window are left out: a lane that has levelled off is flat.
    levelled = [(t, 1_000 - 2.0 * t) for t in range(0, 301, 60)] + [
        (t, 400.0) for t in range(360, 1000, 60)
    ]
    assert rate_trend(levelled, now=960) == pytest.approx(0.0)
    # Fewer than three, or over less than two minutes: no trend yet.
    assert rate_trend(line[:2], now=60) == 0.0
    assert rate_trend([(0.0, 100.0), (30.0, 90.0), (60.0, 80.0)], now=60) == 0.0


def test_the_planner_is_handed_each_lanes_trend(tmp_path: Path) -> None:
    planner, box = lone_box(tmp_path)
    now = time.monotonic()
    box.first_sent, box.answers, box.request_s, box.tokens = now - 100, 10, 10.0, 9_900
    # Its rates of the last minutes, falling by 0.5 tok/s each second to its 100 now.
    planner.rates["box"] = [(now - age, 100 + 0.5 * age) for age in (240, 180, 120, 60)]
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(100, rel=1e-3)
    assert lane.trend == pytest.approx(-0.5, rel=1e-2)
    # Slowing, it delivers less by a deadline than its rate now says, so less is planned on it.
    assert lane.capacity(200) < Lane("box", lane.rate).capacity(200)
    assert all(now - t <= TREND_WINDOW_S for t, _ in planner.rates["box"])


def test_a_free_lanes_rate_is_not_stretched_by_its_queue(tmp_path: Path) -> None:
    # A box of 8 slots at 30 tok/s each (240 tok/s) sent 64: each request waits ~80 s
    # though an answer takes 10 s. Its delivered rate, less the pipe's filling (its first
    # answer, 10 s in), is its pace; less its mean request time it was 327 tok/s.
    planner, box = lone_box(tmp_path)
    now = time.monotonic()
    box.first_sent, box.first_answered = now - 300, now - 290
    box.answers, box.tokens = 240, 72_000  # 300 tokens each, 240 tok/s for 300 s
    box.request_s = 240 * 80.0
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(72_000 / 290, rel=1e-3)  # 248, within 4% of 240


def test_a_free_lane_settles_after_its_first_answers_time_not_its_queues(
    tmp_path: Path,
) -> None:
    # A minute in, requests have waited 40 s on average behind the box's 8 slots: its rate
    # per request times the lane's 64 said 2.7x its pace. Three first-answer times in, what
    # it delivered is its rate.
    planner, box = lone_box(tmp_path)
    now = time.monotonic()
    box.first_sent, box.first_answered = now - 60, now - 50
    box.answers, box.tokens, box.request_s = 40, 12_000, 40 * 40.0
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(12_000 / 50, rel=1e-3)


def test_a_free_lane_is_first_planned_at_the_slots_its_server_runs(tmp_path: Path) -> None:
    # A box of 8 slots at 30 tok/s each (240 tok/s) sent 64: its first answer (300 tokens
    # in 10 s) never waited for a slot, and its rate per request times the lane's 64 said
    # 1,920 tok/s, so the first plan had the box meet any deadline. Its server says it runs
    # 8 at once: 8 slots at that answer's pace.
    planner, box = lone_box(tmp_path, "box=http://box:1,concurrency=64")
    now = time.monotonic()
    box.first_sent, box.first_answered = now - 10.5, now - 0.5
    box.answers, box.tokens, box.request_s, box.first_tokens = 1, 300, 10.0, 300
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(64 * 30.0)  # a server that does not say: as before
    box.capacity = 8
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(8 * 30.0)
    # Queued answers later stretch its mean request time, not its first answer's pace.
    box.answers, box.tokens, box.request_s = 16, 16 * 300, 8 * 10.0 + 8 * 20.0
    box.first_sent, box.first_answered = now - 20.5, now - 10.5
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(8 * 30.0)


def test_a_free_lanes_rate_counts_what_its_requests_in_flight_have_streamed(
    tmp_path: Path,
) -> None:
    # A box of 8 slots at 50 tok/s each (400 tok/s), answers of a mean of 300 with a long
    # tail: 6 s in, the short ones are back (243 tokens), the long ones still streaming.
    # Its answers alone said 94 tok/s and the plan moved its share to the API.
    from gen_tui.backends.budget.lengths import InFlight

    planner, box = lone_box(tmp_path)
    now = time.monotonic()
    box.first_sent, box.first_answered = now - 3.0, now - 2.6
    box.answers, box.tokens, box.request_s = 3, 243, 3.0
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(243 / 2.6, rel=1e-2)  # a client that does not stream
    for index, streamed in enumerate([120, 150, 100, 140, 130, 128, 120, 0]):
        box.flying[f"rid{index}"] = InFlight(now - 3.0, 4_000, produced=streamed)
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx((243 + 888) / 3.0, rel=1e-2)  # 377, the box's pace


def test_a_free_lanes_requests_in_flight_are_read_by_their_age_when_it_does_not_stream(
    tmp_path: Path,
) -> None:
    # A box of 8 slots at 100 tok/s each (800 tok/s), answers of a mean of 600 with a long
    # tail, from a client that does not stream (SGLang's native default): 6 s in, 10 short
    # answers are back (1,400 tokens) and the long ones run. What it delivered said 259
    # tok/s (the plan moved 24k of its share to the API); each request's age past the box's
    # latency line (0.1 s + 10 ms a token) says what it has made.
    from gen_tui.backends.budget.lengths import InFlight

    planner, box = lone_box(tmp_path)
    now = time.monotonic()
    box.first_sent, box.first_answered = now - 6.0, now - 5.4
    for tokens in (50, 80, 120, 150, 200, 250, 300, 100, 90, 60):
        box.answered(tokens, 0.1 + tokens / 100, 0.0)
    ages = (1.0, 2.0, 3.0, 4.0, 5.0, 5.5, 5.9, 6.0)
    for index, age in enumerate(ages):
        box.flying[f"run{index}"] = InFlight(now - age, 32_767)
    made = sum(age - 0.1 for age in ages) * 100  # 3,160
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx((1_400 + made) / 6.0, rel=1e-2)  # 760, not 259
    # Four more sent past its 8 slots wait at the server: they made nothing yet.
    for index in range(4):
        box.flying[f"queued{index}"] = InFlight(now - 0.5, 32_767)
    box.capacity = 8
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx((1_400 + made) / 6.0, rel=1e-2)
    # One cut at 100 tokens has made at most those; a streamed count is taken as it is.
    box.flying["run7"] = InFlight(now - 6.0, 100)
    box.flying["run6"] = InFlight(now - 5.9, 32_767, produced=400)
    made = sum(age - 0.1 for age in ages[:6]) * 100 + 100 + 400
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx((1_400 + made) / 6.0, rel=1e-2)


def test_before_its_latency_line_a_free_lanes_requests_are_read_at_its_answers_pace(
    tmp_path: Path,
) -> None:
    # The same box 4 s in: 5 answers back (too few for a line), 8 running on its 8 slots.
    # Their ages at its answers' pace (request-seconds per token, 10.4 ms) say what they
    # made; what it delivered less its first answer's time said about 259 tok/s.
    from gen_tui.backends.budget.lengths import InFlight

    planner, box = lone_box(tmp_path)
    now = time.monotonic()
    box.first_sent, box.first_answered = now - 4.0, now - 3.4
    for tokens in (50, 80, 120, 60, 90):
        box.answered(tokens, 0.1 + tokens / 100, 0.0)
    assert box.line.fitted() is None
    pace = box.request_s / box.tokens
    ages = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.0)
    for index, age in enumerate(ages):
        box.flying[f"run{index}"] = InFlight(now - age, 32_767)
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(400 / 3.4, rel=1e-2)  # it does not say its slots
    box.capacity = 8
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx((400 + sum(ages) / pace) / 4.0, rel=1e-2)  # 724
    # With more sent than its slots, a request's age counts its wait too: as before.
    box.flying["queued"] = InFlight(now - 0.2, 32_767)
    (lane,) = planner.measured()
    assert lane.rate == pytest.approx(400 / 3.4, rel=1e-2)
