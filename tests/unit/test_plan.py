"""The fleet planner (backends/plan): exact against brute force on small cases, and the
sentences it owes a user (no deadline, a deadline the free lanes miss, a cap that cannot
meet it, a lane gone).

Brute force: with whole rates, turnarounds and finish times every lane's capacity is whole,
so the least-cost split at a finish time is found by trying every whole split."""

from __future__ import annotations

import itertools
import math
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gen_tui.backends.plan import (
    DeadlineError,
    Lane,
    LaneState,
    PlanStatus,
    explain,
    parse_deadline,
    plan,
)

MAX_TOKENS = 24


def brute_cost(lanes: list[Lane], tokens: int, window: float) -> float | None:
    """The least cost of any whole split of `tokens` finishing within `window`."""
    caps = [min(tokens, math.floor(lane.capacity(window) + 1e-9)) for lane in lanes]
    best = None
    for split in itertools.product(*(range(cap + 1) for cap in caps)):
        if sum(split) != tokens:
            continue
        cost = sum(lane.price * x for lane, x in zip(lanes, split, strict=True))
        best = cost if best is None else min(best, cost)
    return best


def brute_finish(lanes: list[Lane], tokens: int, bound: float, start: int = 0) -> int | None:
    """The first whole second from `start` at which `tokens` cost at most `bound`."""
    for window in range(start, 200):
        cost = brute_cost(lanes, tokens, window)
        if cost is not None and cost <= bound + 1e-9:
            return window
    return None


lane_st = st.builds(
    Lane,
    name=st.just(""),
    rate=st.integers(0, 6).map(float),
    price=st.integers(0, 5).map(float),
    turnaround_s=st.integers(0, 6).map(float),
    state=st.sampled_from([LaneState.UP, LaneState.UP, LaneState.DOWN]),
)
fleet_st = st.lists(lane_st, min_size=1, max_size=3).map(
    lambda lanes: [
        Lane(f"l{i}", lane.rate, lane.price, lane.turnaround_s, state=lane.state)
        for i, lane in enumerate(lanes)
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    lanes=fleet_st,
    tokens=st.integers(1, MAX_TOKENS),
    deadline=st.none() | st.integers(1, 30),
    max_cost=st.none() | st.integers(0, 80),
)
def test_the_plan_is_the_brute_force_optimum(
    lanes: list[Lane], tokens: int, deadline: int | None, max_cost: int | None
) -> None:
    made = plan(lanes, tokens, None if deadline is None else float(deadline), max_cost)
    assert sum(made.tokens.values()) <= tokens
    if not any(lane.usable for lane in lanes):
        assert made.status is PlanStatus.STALLED
        return
    cap = math.inf if max_cost is None else float(max_cost)
    # Never past the cap, and each lane within what it delivers by the plan's finish.
    assert made.cost <= cap + 1e-6
    for lane in lanes:
        assert made.tokens[lane.name] <= lane.capacity(made.finish_s) + 1.0 + 1e-6
    floor_cost = brute_cost(lanes, tokens, 1e6)
    assert floor_cost is not None
    if floor_cost > cap:  # no finish time lets the cap buy it all
        assert made.status is PlanStatus.SHORT
        cheapest = min(lane.price for lane in lanes if lane.usable)
        assert sum(made.tokens.values()) == min(tokens - 1, math.floor(cap / cheapest))
        return
    assert sum(made.tokens.values()) == tokens
    at_deadline = None if deadline is None else brute_cost(lanes, tokens, deadline)
    if deadline is None:
        # The least cost there is, as early as it can be had.
        assert made.status is PlanStatus.MEETS
        assert made.cost == pytest.approx(floor_cost, abs=1e-6)
        first = brute_finish(lanes, tokens, floor_cost)
        assert first is not None and first - 1 < made.finish_s <= first + 1e-3
    elif at_deadline is not None and at_deadline <= cap:
        # Meets the deadline at the least cost that does.
        assert made.status is PlanStatus.MEETS
        assert made.cost == pytest.approx(at_deadline, abs=1e-6)
        assert made.finish_s <= deadline + 1e-6
    else:
        # The deadline is out of reach within the cap: the earliest finish the cap allows.
        assert made.status is PlanStatus.LATE
        assert made.finish_s > deadline - 1e-6
        first = brute_finish(lanes, tokens, cap, start=deadline)
        assert first is not None and first - 1 < made.finish_s <= first + 1e-3
        assert "late" in made.note


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(1, 1e4),
    trend=st.floats(-50, 50),
    window=st.floats(0, 1e4),
    more=st.floats(0, 1e4),
)
def test_a_lanes_capacity_never_shrinks_as_the_window_grows(
    rate: float, trend: float, window: float, more: float
) -> None:
    lane = Lane("box", rate, trend=trend)
    assert 0 <= lane.capacity(window) <= lane.capacity(window + more) + 1e-6


SEED_TOKENS = 92_000_000
BOX = Lane("box", rate=1_200.0)  # about 21 h for the seed's 92M tokens
API = Lane("api", rate=46_000.0, price=0.94e-6)  # 33 minutes, $86


def test_without_a_deadline_the_free_box_alone() -> None:
    made = plan([BOX, API], SEED_TOKENS)
    assert made.tokens == {"box": SEED_TOKENS, "api": 0}
    assert made.cost == 0
    assert made.finish_s == pytest.approx(SEED_TOKENS / 1_200, rel=1e-5)
    assert made.note == "no deadline: the free lanes alone"


def test_a_deadline_the_box_misses_buys_only_what_it_needs() -> None:
    made = plan([BOX, API], SEED_TOKENS, deadline_s=8 * 3600, max_cost=60)
    box = 1_200 * 8 * 3600
    assert made.status is PlanStatus.MEETS
    assert made.tokens["box"] == pytest.approx(box, abs=2)
    assert made.tokens["api"] == SEED_TOKENS - made.tokens["box"]
    assert made.cost == pytest.approx((SEED_TOKENS - box) * 0.94e-6, rel=1e-6)
    assert made.line() == "box 34.56M · api 57.44M $53.99 · finish in 8h00m · $53.99 of $60.00"


def test_a_cap_that_cannot_meet_the_deadline_says_the_best_finish_at_once() -> None:
    made = plan([BOX, API], SEED_TOKENS, deadline_s=2 * 3600, max_cost=60)
    assert made.status is PlanStatus.LATE
    assert made.cost == pytest.approx(60, abs=0.01)
    assert made.note.startswith(
        "meeting the deadline costs $78.36, over the $60.00 cap: "
        "the best finish is 4h31m late, in 6h31m"
    )
    assert made.finish_s == pytest.approx((SEED_TOKENS - 60 / 0.94e-6) / 1_200, rel=1e-4)


def test_no_free_lane_and_a_small_cap_plans_what_the_cap_buys() -> None:
    made = plan([API, Lane("box", 1_200, state=LaneState.DOWN)], SEED_TOKENS, max_cost=10)
    assert made.status is PlanStatus.SHORT
    assert made.tokens["api"] == math.floor(10 / 0.94e-6)
    assert "cap buys 10.64M of the 92M tokens left" in made.note


def test_a_batch_lane_takes_tokens_only_after_its_turnaround() -> None:
    batch = Lane("batch", rate=20_000.0, price=0.47e-6, turnaround_s=3600)
    made = plan([BOX, API, batch], SEED_TOKENS, deadline_s=2 * 3600, max_cost=100)
    assert made.tokens["batch"] == pytest.approx(20_000 * 3600, rel=1e-6)
    assert made.tokens["box"] == pytest.approx(1_200 * 7200, rel=1e-6)
    assert made.tokens["api"] == SEED_TOKENS - made.tokens["box"] - made.tokens["batch"]


def test_a_batch_lanes_tokens_come_in_whole_waves() -> None:
    """A batch lane (issue 33 in the fleet) delivers its batches in flight at once, each
    turnaround: nothing before the first, whole waves after, never a part of one."""
    batch = Lane("batch", rate=2_000 / 4, price=5e-6, turnaround_s=4.0, wave=2_000)
    assert [batch.capacity(w) for w in (3.9, 4.0, 7.9, 8.0, 17.0)] == [
        0,
        2_000,
        2_000,
        4_000,
        8_000,
    ]
    box = Lane("box", rate=200.0)
    api = Lane("api", rate=3_200.0, price=10e-6)
    made = plan([box, api, batch], 20_000, deadline_s=17.0, max_cost=1)
    # The free box at full speed, the cheaper batch lane's four waves, the API the rest.
    assert made.tokens == {"box": 3_400, "batch": 8_000, "api": 8_600}, made
    assert made.cost == pytest.approx(8_000 * 5e-6 + 8_600 * 10e-6)
    # Its turnaround past the deadline: it gets nothing, the API takes its share.
    late = Lane("batch", rate=2_000 / 18, price=5e-6, turnaround_s=18.0, wave=2_000)
    assert plan([box, api, late], 20_000, deadline_s=17.0).tokens["batch"] == 0


def test_a_lane_going_down_is_said_in_one_line() -> None:
    batch = Lane("batch", rate=10_000.0, price=0.47e-6, turnaround_s=600)
    before = plan([BOX, API, batch], 40_000_000, deadline_s=3600, max_cost=60)
    assert before.tokens == {"box": 4_320_000, "api": 5_680_000, "batch": 30_000_000}
    down = Lane("api", API.rate, API.price, state=LaneState.DOWN)
    after = plan([BOX, down, batch], 40_000_000, deadline_s=3600, max_cost=60)
    assert after.tokens["api"] == 0
    assert after.status is PlanStatus.LATE
    assert explain(before, after) == (
        "api lane down: 5.68M moved to batch; no lane mix meets the deadline: "
        f"the best finish is {after.note.split(' is ')[1]}"
    )
    assert explain(after, after) is None
    # Up again: the tokens go back, and the line says where from.
    assert explain(after, before) == "api lane up again: 5.07M moved to api"


def test_a_slower_lane_is_named_with_its_rates() -> None:
    before = plan([BOX, API], SEED_TOKENS, deadline_s=8 * 3600)
    slower = Lane("box", rate=600.0)
    line = explain(before, plan([slower, API], SEED_TOKENS, deadline_s=8 * 3600))
    assert line is not None and line.startswith("box slower (1,200 → 600 tok/s): ")
    assert line.endswith("moved to api")


def test_the_lane_whose_rate_moved_most_is_the_one_named() -> None:
    # A box read low at first (246 tok/s) and then at its pace (760) takes tokens back from
    # an API whose rate barely moved: the box is why, not the API's 0.3%.
    api = Lane("api", rate=126_460.0, price=0.94e-6)
    before = plan([Lane("box", rate=246.0), api], 400_000, deadline_s=50, max_cost=5)
    api_now = Lane("api", rate=126_065.0, price=0.94e-6)
    after = plan([Lane("box", rate=760.0), api_now], 400_000, deadline_s=50, max_cost=5)
    line = explain(before, after)
    assert line is not None and line.startswith("box faster (246 → 760 tok/s): "), line
    assert line.endswith("moved to box"), line
    # The box slowing by half as the API's rate rises 3%: the box is named.
    before = plan([BOX, API], SEED_TOKENS, deadline_s=8 * 3600)
    quicker = Lane("api", rate=API.rate * 1.03, price=API.price)
    line = explain(before, plan([Lane("box", rate=600.0), quicker], SEED_TOKENS, 8 * 3600))
    assert line is not None and line.startswith("box slower (1,200 → 600 tok/s): "), line


def test_deadlines_as_a_time_of_day_or_a_duration() -> None:
    evening = datetime(2026, 12, 4, 23, 0)
    assert parse_deadline("07:30", evening) == 8.5 * 3600
    assert parse_deadline("23:30", evening) == 1800
    assert parse_deadline("23:00", evening) == 24 * 3600  # now has passed: tomorrow's
    assert parse_deadline("8h") == 8 * 3600
    assert parse_deadline("2h30m") == 9000
    assert parse_deadline("90s") == 90
    for bad in ("", "7.30", "25:00", "12:60", "0s", "8 hours", "h", "-1h"):
        with pytest.raises(DeadlineError, match=r"expected a time of day|no such time of day"):
            parse_deadline(bad, evening)


@pytest.mark.parametrize(
    ("hours", "line"),
    [
        (None, "box 92M · finish in 21h30m · $0.000 of $60.00"),
        (20, "box 85.58M · api 6.42M $6.00 · finish in 20h00m · $6.00 of $60.00"),
        (8, "box 34.23M · api 57.77M $54.00 · finish in 8h00m · $54.00 of $60.00"),
        (2, "box 27.81M · api 64.19M $60.00 · finish in 6h30m · $60.00 of $60.00"),
    ],
)
def test_the_seeds_night_as_docs_fleet_md_tells_it(hours: int | None, line: str) -> None:
    """docs/fleet.md's table: the box at its measured 21.5 h for 92M, OpenRouter's $86 in 33
    minutes for them, a $60 cap."""
    box = Lane("box", rate=SEED_TOKENS / (21.5 * 3600))
    api = Lane("api", rate=SEED_TOKENS / (33 * 60), price=86 / SEED_TOKENS)
    made = plan([box, api], SEED_TOKENS, None if hours is None else hours * 3600, 60)
    assert made.line() == line
    if hours == 2:
        assert made.note.startswith("meeting the deadline costs $78.00, over the $60.00 cap")


@pytest.mark.parametrize("cap", [-1.0, -1e-9, math.nan])
def test_a_cap_below_zero_or_not_a_number_is_refused_in_one_line(cap: float) -> None:
    # Before: a SHORT plan saying "the $-1.000 cap buys -1M of the 1M tokens left".
    with pytest.raises(ValueError, match="spend cap"):
        plan([BOX], 1_000_000, None, cap)
