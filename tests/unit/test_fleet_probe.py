"""Before the first plan a priced lane sends one request, not a wave (issue 34): the plan
counts its rate per request at its width, which one answer measures. A wave was bought
whatever the plan then gave the lane: with a 40 s deadline the first plan gave the API
nothing (a batch lane at half its price made the rest), and its first wave of 16 answers,
about 11% of the run's cost at twice the batch price, put the run at 1.06x to 1.11x the
offline optimum."""

from __future__ import annotations

from pathlib import Path

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
