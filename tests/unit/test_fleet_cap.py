"""The spend cap over a mixed fleet (issue 34): the plan pays the answers in flight from it
(an answer the deadline's watch moved to a priced lane at its expected length, not the
lane's mean), the cap is one fact (the panel's new cap is the cost meter's), and it ends a
run only when no lane is free: with a box, the priced lanes stop and the box goes on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.plan.control import PlanTarget
from tests.support.fleet_planner import measured_planner

PRICE = 10e-6  # the API's, as measured_planner measured it ($0.05 for 5,000 tokens)


def config(tmp_path: Path, lanes: list[str], max_cost: float = 1.0) -> EngineConfig:
    return EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=200_000)],
        lanes=lanes,
        deadline="60s",
        max_cost=max_cost,
    )


BOX, API = "box=http://box:1", "api=http://api:1,api=openai,concurrency=16,price=0/10"


def test_an_answer_moved_to_a_priced_lane_is_paid_from_the_cap_at_its_expected_length(
    tmp_path: Path,
) -> None:
    planner, _, _ = measured_planner(config(tmp_path, [BOX, API]), tmp_path / "A", 0)
    box, api = planner.runner.servers
    assert planner.committed() == 0.0  # nothing spent in this run's datasets, none out
    now = time.monotonic()
    api.outstanding = 2
    api.flying["sent"] = InFlight(now, 200)  # at the API's mean answer, 50
    api.flying["moved"] = InFlight(now, 32_767, expect=3_900.0)  # the box's, moved there
    assert planner.committed() == pytest.approx((50 + 3_900) * PRICE)
    api.flying["sent"].produced = 120  # past its mean: what it has streamed
    assert planner.committed() == pytest.approx((120 + 3_900) * PRICE)
    # A free lane's answers cost nothing, however long.
    box.flying["long"] = InFlight(now, 32_767, expect=9_000.0)
    assert planner.committed() == pytest.approx((120 + 3_900) * PRICE)


def test_a_cap_the_panel_sets_is_the_cost_meters_and_ends_a_run_without_a_free_lane(
    tmp_path: Path,
) -> None:
    planner, _, _ = measured_planner(config(tmp_path, [BOX, API]), tmp_path / "A", 0)
    assert planner.has_free_lane()  # the box: the cap stops the API alone
    planner.retarget(PlanTarget("60s", 0.2))
    assert planner.cost.max_cost == planner.max_cost == 0.2
    planner.retarget(PlanTarget("60s", None))
    assert planner.cost.max_cost is None
    only_api = config(tmp_path, ["api=http://api:1,api=openai,concurrency=16,price=0/10"])
    priced, _, _ = measured_planner(only_api, tmp_path / "B", 0)
    assert not priced.has_free_lane()


def test_the_plan_keeps_a_mean_answer_and_the_spread_of_a_full_width_in_hand(
    tmp_path: Path,
) -> None:
    # The API: 16 wide, answers of a mean of 50 with a deviation of 15. It sends while its
    # share has any room (up to one answer past it), and its last 16 answers in flight,
    # each counted at 50, may run 2 x 4 x 15 tokens past that together.
    planner, _, _ = measured_planner(config(tmp_path, [BOX, API]), tmp_path / "A", 0)
    _, api = planner.runner.servers
    api.tokens2 = 100 * (50 * 50 + 15 * 15)
    assert api.answer_spread == pytest.approx(15)
    assert planner.cap_reserve() == pytest.approx((50 + 2 * 4 * 15) * PRICE)
    # What the route and the watch may send outside the plan's shares keeps it too.
    assert planner.room() == pytest.approx(1.0 - planner.cap_reserve())
    made = planner.replan()
    assert made is not None and made.max_cost == pytest.approx(1.0 - planner.cap_reserve())
