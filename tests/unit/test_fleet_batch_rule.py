"""The batch lane near a deadline (issue 34): the planner tells it when a new batch must land
(`land_by`: the deadline less the plan's margin), and a batch whose turnaround passes that
is not sent: its tokens go to the live lanes, whose soonest lane takes the requests sent
within the margin. A three-lane run once sent a batch about 4.5 s before its deadline; it
landed under a second before it, the budget's rule held the live taper until it did, and
the API's rounds after it ended the run late."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gen_tui.backends.budget.rules import may_dispatch
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine.batch_lane import BatchLane
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.fleet import FleetPlanner
from gen_tui.backends.plan import PlanStatus
from gen_tui.backends.store.batch_journal import OpenBatch
from gen_tui.backends.store.prompts import Prompt
from tests.support.fleet_planner import measured_planner

TURNAROUND_S = 4.0
"""The batch lane's `turnaround=`: what it is planned at before any batch of it ended."""
BATCH_REQUESTS = 20


def fleet(
    tmp_path: Path, done: int = 5_000, deadline: str | None = "25s"
) -> tuple[FleetPlanner, BatchLane, DatasetRun]:
    """The bench's three lanes (a free box, 4 slots at 1 s a request; a priced API, 16 in
    flight at 0.25 s; a batch lane at half the API's price), measured, with `done` of a
    20,000-token budget on disk, of answers of about 50 tokens."""
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=20_000)],
        lanes=[
            "box=http://box:1",
            "api=http://api:1,api=openai,concurrency=16,price=0/10",
            f"batch=http://batch:1,api=openai-batch,price=0/5,turnaround={TURNAROUND_S:g}s",
        ],
        concurrency=4,
        sampling={"max_new_tokens": 200},
        deadline=deadline,
        max_cost=1.0,
        batch_max_requests=BATCH_REQUESTS,
        batch_in_flight=2,
    )
    planner, ds, run = measured_planner(config, tmp_path / "A", done)
    lane = BatchLane(
        run,
        None,  # type: ignore[arg-type]  # the client, feed, sink ... : _room needs none
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        spec=config.batch_lane,
    )
    planner.batch = lane
    return planner, lane, ds


def test_the_plan_tells_the_batch_lane_to_land_by_the_deadline_less_its_margin(
    tmp_path: Path,
) -> None:
    planner, lane, _ = fleet(tmp_path)
    made = planner.replan()
    assert made is not None and made.status is PlanStatus.MEETS
    assert planner.deadline_at is not None and lane.land_by is not None
    assert planner.margin_s > 0
    assert lane.land_by == pytest.approx(planner.deadline_at - planner.margin_s)
    assert lane.allowance == made.tokens["batch"] > 0  # it is planned a share: it is cheap
    # A later deadline moves it with it; none, and a batch may land whenever.
    planner.deadline_at += 30
    planner.replan()
    assert lane.land_by == pytest.approx(planner.deadline_at - planner.margin_s)
    planner, lane, _ = fleet(tmp_path, deadline=None)
    planner.replan()
    assert lane.land_by is None


def test_a_batch_that_would_land_within_the_margin_is_not_sent(tmp_path: Path) -> None:
    planner, lane, ds = fleet(tmp_path)
    planner.replan()
    assert lane.land_by is not None and lane.allowance > 0
    mean = ds.expected.mean(0)
    wanted = min(BATCH_REQUESTS, int(lane.allowance // mean))
    assert wanted > 0
    # Room for a batch while one lands before `land_by`: what its share buys.
    lane.land_by = time.monotonic() + TURNAROUND_S + 0.5
    assert lane._room(ds) == wanted
    # One that would land past it (by a tenth of a second): none, however large its share.
    lane.land_by = time.monotonic() + TURNAROUND_S - 0.1
    assert lane._room(ds) == 0
    lane.allowance = 1e9
    assert lane._room(ds) == 0
    # No deadline: its share alone.
    lane.land_by = None
    assert lane._room(ds) == BATCH_REQUESTS


def test_the_land_by_rule_counts_the_turnaround_seen(tmp_path: Path) -> None:
    # The lane's turnaround is what its batches took, not its `turnaround=`: batches that
    # took 6 s make one sent now land 6 s on, past a land-by 5 s away.
    planner, lane, ds = fleet(tmp_path)
    planner.replan()
    lane.land_by = time.monotonic() + TURNAROUND_S + 1.0
    assert lane._room(ds) > 0
    lane.turnarounds = [6.0, 6.0]
    assert lane._room(ds) == 0


def test_within_the_margin_a_request_goes_to_the_soonest_live_lane_not_the_batch(
    tmp_path: Path,
) -> None:
    # The batch lane is no live server: a request the deadline hurries goes to the API (the
    # soonest live lane), its tokens past the batch lane's land-by.
    planner, lane, _ = fleet(tmp_path)
    planner.replan()
    box, api = planner.runner.servers
    assert planner.deadline_at is not None and lane.land_by is not None
    planner.deadline_at = time.monotonic() + planner.margin_s + 0.5  # a box answer: 1 s
    box.outstanding += 1
    assert planner.route(box, 200, lone=False) is api
    planner.deadline_at = time.monotonic() + planner.margin_s + 1.5
    box.outstanding += 1
    assert planner.route(box, 200, lone=False) is box


def test_a_batchs_lines_out_leave_the_live_lanes_room_for_the_rest(tmp_path: Path) -> None:
    # Its 40 lines count at the mean (about 2,000 tokens) however long they are out: with
    # 16,800 of 20,000 on disk the live lanes go on (as live requests 3 s old, the lines
    # would be answers past the cap, and the live lanes would wait on them).
    planner, lane, ds = fleet(tmp_path, done=16_800)
    lines = {f"A/{i}": Prompt(i, [{"role": "user", "content": "hi"}], i) for i in range(40)}

    async def send() -> None:
        lane._start(ds, OpenBatch("k", list(lines), 0.0), lines, dict.fromkeys(lines, 200), b"")
        for flight in lane.flights.values():
            assert flight.task is not None
            flight.task.cancel()  # no provider here: the lines only need to be out

    asyncio.run(send())
    assert len(ds.inflight) == 40
    for entry in ds.inflight:
        entry.started -= 3.0
    config = planner.config
    assert may_dispatch(
        config.budget_mode, ds.budget, ds.tokens, ds.budget_samples, ds.inflight, ds.model, 200,
        expected=ds.expected,
    )  # fmt: skip
