"""Before the first plan a priced lane sends one request, not a wave (issue 34): the plan
counts its rate per request at its width, which one answer measures. A wave was bought
whatever the plan then gave the lane: with a 40 s deadline the first plan gave the API
nothing (a batch lane at half its price made the rest), and its first wave of 16 answers,
about 11% of the run's cost at twice the batch price, put the run at 1.06x to 1.11x the
offline optimum."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from tests.support.fleet_planner import measured_planner


def test_a_priced_lane_sends_one_request_before_the_first_plan_then_its_share(
    tmp_path: Path,
) -> None:
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=20_000)],
        lanes=["box=http://box:1", "api=http://api:1,api=openai,concurrency=16,price=0/10"],
        concurrency=4,
        deadline="30s",
        max_cost=1.0,
    )
    planner, _ds, _run = measured_planner(config, tmp_path / "A", 0)  # measured, not planned
    runner = planner.runner
    box, api = runner.servers
    box.outstanding = 4  # the free box's slots are full: only the API could take more
    assert runner.reserve() is api
    assert not api.has_room() and runner.reserve() is None  # one request, not 16
    # The plan then gives it its share (the box alone is too slow for 30 s: it buys API
    # tokens), and the API takes it at its full width.
    api.outstanding = 0
    made = planner.replan()
    assert made is not None and made.tokens["api"] > 0
    taken = [runner.reserve() for _ in range(16)]
    assert taken == [api] * 16


def test_a_fleet_request_is_read_by_its_lanes_own_latency_line(tmp_path: Path) -> None:
    """Lanes decode at their own speeds (budget/lengths.py `LatencyLine`): each lane learns
    its line from its answers, and a request's attempt is read by its lane's; a run of one
    server reads the dataset's, as before."""
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=20_000)],
        lanes=["box=http://box:1", "api=http://api:1,api=openai,concurrency=16,price=0/10"],
        concurrency=4,
    )
    planner, _ds, _run = measured_planner(config, tmp_path / "A", 0)
    runner = planner.runner
    box, api = runner.servers
    for length in range(100, 1000, 100):
        box.answered(length, 0.1 + length / 100, 0.0)
        api.answered(length, 0.1 + length / 2000, 0.0)
    assert box.line.fitted() == pytest.approx((0.1, 1 / 100))
    assert api.line.fitted() == pytest.approx((0.1, 1 / 2000))
    assert box.answers == api.answers == 109  # and the planner's measures, as before
    entry = InFlight(0.0, 200)
    runner.begin_attempt(entry, box)
    assert entry.line is box.line and entry.produced == 0 and entry.started > 0
    runner.begin_attempt(entry, api)
    assert entry.line is api.line
    single = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=20_000)],
        server_urls=["http://box:1"],
    )
    planner, _ds, _run = measured_planner(single, tmp_path / "B", 0)
    planner.runner.begin_attempt(entry, planner.runner.servers[0])
    assert entry.line is None
