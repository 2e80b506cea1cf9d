"""The plan's margin before the deadline (issue 34, backends/plan/margin.py): the run's tail
from measured request times, not one mean answer of the slowest lane. On the simulator that
margin (1.05 s) let the 15 s run end 0.5 s late: the budget's last answers went one at a
time, 0.18 to 0.25 s each on the API, after the box's last answer."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.fleet import FleetPlanner, request_times
from gen_tui.backends.plan import PlanStatus, RequestTimes, finish_margin
from gen_tui.backends.plan.margin import MARGIN_Z
from tests.support.fleet_planner import API_S, BOX_S, measured_planner


def test_the_margin_is_the_taper_on_the_soonest_lane_or_the_slow_lanes_tail() -> None:
    box, api = RequestTimes(*BOX_S), RequestTimes(*API_S)
    # Four answers one after another on the API: their sum, four means and two deviations
    # of a sum of four; longer than what one box answer's tail adds to its mean (0.6 s).
    taper = 4 * 0.25 + MARGIN_Z * 2 * 0.07
    assert finish_margin([box, api], 4, api) == pytest.approx(taper)
    assert taper > 1.0  # more than the one mean box answer that was planned before
    # No taper left: the box's last answer's tail past its mean (its capacity waits the mean).
    assert finish_margin([box, api], 0, api) == pytest.approx(MARGIN_Z * 0.3)
    assert finish_margin([], 0, None) == 0.0
    # A spread lane is planned at its tail: a wider spread, a wider margin.
    assert finish_margin([RequestTimes(1.0, 0.5), api], 1, api) > finish_margin([box, api], 1, api)


def fleet(
    tmp_path: Path,
    done: int,
    budget: int = 20_000,
    cap: int = 200,
    answers: int = 200,
    deadline: str = "15s",
) -> tuple[FleetPlanner, DatasetRun]:
    """A planner over the bench's box (4 slots, 1 s a request) and API (16 in flight, 0.25 s),
    both measured, with `done` of a `budget` on disk, and `answers` back of about 50."""
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=budget)],
        lanes=["box=http://box:1", "api=http://api:1,api=openai,concurrency=16,price=0/10"],
        concurrency=4,
        sampling={"max_new_tokens": cap},
        deadline=deadline,
        max_cost=1.0,
    )
    planner, ds, _ = measured_planner(config, tmp_path / f"A{answers}", done, answers)
    return planner, ds


def test_request_times_are_the_measured_mean_and_spread(tmp_path: Path) -> None:
    planner, _ = fleet(tmp_path, 0)
    box = request_times(planner.runner.servers[0])
    assert box is not None
    assert (box.mean_s, box.sd_s) == pytest.approx(BOX_S)


def test_the_taper_is_counted_from_the_budgets_own_rule(tmp_path: Path) -> None:
    rounds = []
    for done in (19_000, 19_600, 19_900, 20_000):
        planner, _ = fleet(tmp_path, done)
        rounds.append(planner.taper_rounds())
    # The closer to the budget, the fewer rounds are left; none once it is reached; and
    # near it, at least the lone crossing answer's round.
    assert rounds[0] >= rounds[1] >= rounds[2] > 0.9, rounds
    assert rounds[-1] == 0.0


def test_the_plan_finishes_its_bulk_the_margin_before_the_deadline(tmp_path: Path) -> None:
    planner, _ = fleet(tmp_path, 18_000)
    made = planner.replan()
    assert made is not None and planner.deadline_at is not None
    rounds = planner.taper_rounds()
    assert rounds > 1
    # The taper's answers, on the API, one after another: more than the one box answer
    # the plan kept before, and the plan's finish leaves them room before the deadline.
    assert planner.margin_s >= rounds * API_S[0]
    assert planner.margin_s > BOX_S[0], (planner.margin_s, rounds)
    assert planner.margin_s == pytest.approx(
        finish_margin([RequestTimes(*BOX_S), RequestTimes(*API_S)], rounds, RequestTimes(*API_S)),
        rel=1e-6,
    )
    left = planner.deadline_at - time.monotonic()
    assert made.finish_s <= left - planner.margin_s + 1e-3
    assert not math.isinf(made.finish_s)


def test_a_plan_late_only_by_the_margins_caution_is_planned_to_the_likely_tail_unsaid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The last seconds: 20 taper rounds on the API are 5 s at its mean, 5.6 s with their
    # deviations, and 5.4 s are left. Against the cautious margin nothing is left to plan
    # in (it said `no lane mix meets the deadline: the best finish is 0s late`, in the
    # warning's colour, of a run that ended 5 s early); against the likely tail the API
    # makes the last 100 tokens in time.
    planner, _ = fleet(tmp_path, 19_900)
    said: list[str] = []
    monkeypatch.setattr(planner, "taper_rounds", lambda: 20.0)
    monkeypatch.setattr(planner, "_say", lambda line, made: said.append(line))
    assert planner.replan() is not None
    assert planner.deadline_at is not None
    planner.deadline_at = time.monotonic() + 5.4
    made = planner.replan()
    assert made is not None and made.status is PlanStatus.MEETS, made
    assert planner.margin_s > 5.4 and made.tokens["api"] == made.remaining > 0, made
    assert not [line for line in said if "meets the deadline" in line], said
    # Late even at the likely tail (4.5 s left): said, as before.
    planner.deadline_at = time.monotonic() + 4.5
    made = planner.replan()
    assert made is not None and made.status is PlanStatus.LATE, made
    assert "no lane mix meets the deadline" in said[-1], said


def test_a_request_landing_within_the_margin_goes_to_the_soonest_lane(tmp_path: Path) -> None:
    # bench fleet_plan, 15 s: a box request sent 2.1 s before the deadline, with a margin
    # of 1.4 s, landed 1.1 s before it; the budget's taper waited on it, and its four
    # rounds after it on the API ended the run late. Sent now, a box answer (1 s) lands
    # within the margin: it goes to the API, though more time is left than either.
    planner, _ = fleet(tmp_path, 18_000)
    planner.replan()
    box, api = planner.runner.servers
    planner.margin_s = 1.4
    for left in (2.1, 1.2):  # and one sent within the margin itself
        planner.deadline_at = time.monotonic() + left
        box.outstanding += 1
        assert planner.route(box, 200, lone=False) is api
    # One that lands before the margin stays on the free box.
    planner.deadline_at = time.monotonic() + 2.6
    box.outstanding += 1
    assert planner.route(box, 200, lone=False) is box


def test_the_taper_is_counted_past_the_answers_in_flight(tmp_path: Path) -> None:
    # The plan's tokens are those beyond the answers in flight, so are the taper's rounds:
    # ten answers in flight (at the mean, 50 each) count as if on disk, not as ten more to
    # send. Counted from the disk, the walk sent them again, its rounds moving as they landed.
    landed, _ = fleet(tmp_path, 19_500)
    flying, ds = fleet(tmp_path, 19_000)
    ds.inflight = [InFlight(time.monotonic(), 200) for _ in range(10)]
    assert flying.taper_rounds() == pytest.approx(landed.taper_rounds())
    on_disk, _ = fleet(tmp_path, 19_000)
    assert on_disk.taper_rounds() != pytest.approx(landed.taper_rounds())


def test_the_taper_walk_learns_as_its_answers_land(tmp_path: Path) -> None:
    """The first plan comes two answers in, when the budget's rule is at its most cautious
    (each answer not back counts at the cap, 32,767 here). Walked with that alone, a 400k
    budget let out 13 answers a round, then one at a time: 770 rounds, a margin of 62 s of
    a 60 s deadline, where the run's own taper took 3 s. The walk's answers land in copies
    of the models, as the run's will: two answers in, it walks about what it walks with a
    thousand back, and the dataset's own models are left as they were."""
    few, ds = fleet(tmp_path, 100, 400_000, 32_767, answers=2, deadline="60s")
    many, _ = fleet(tmp_path, 100, 400_000, 32_767, answers=1000, deadline="60s")
    early, settled = few.taper_rounds(), many.taper_rounds()
    assert 1 <= settled <= early <= 2 * settled + 5, (early, settled)
    assert (ds.model.observed, ds.expected.finished) == (2, 2)
