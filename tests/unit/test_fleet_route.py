"""With a deadline, the request that decides the finish goes to the lane that delivers it
soonest (issue 34): the budget's last answer, sent alone (the crossing answer's rule), and
any request sent when less time is left than the chosen lane takes, go to the fastest lane
whose price for them stays under the cap, not to the slow free box the dispatcher would
pick (the first of the least loaded). The rehearsal of 5 December saw that last answer
land on the box 0.37 s after the deadline."""

from __future__ import annotations

import time
from pathlib import Path

from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine.context import RunContext
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.fleet import FleetPlanner
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.engine.runner import RequestRunner, Server
from gen_tui.backends.engine.signals import RunSignals
from gen_tui.backends.plan import Lane, plan

BOX, API = "http://box:1", "http://api:1"
PRICE = 10e-6


def fleet(
    tmp_path: Path, deadline: str | None = "20s", max_cost: float | None = 1.0
) -> tuple[FleetPlanner, Server, Server, list[str]]:
    """A planner over a slow free box (1 s a request of 50 tokens) and a fast priced API
    (0.25 s, 16 slots), both measured, its plan buying API tokens to meet the deadline."""
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=20_000)],
        lanes=[f"box={BOX}", f"api={API},api=openai,concurrency=16,price=0/10"],
        deadline=deadline,
        max_cost=max_cost,
    )
    said: list[str] = []
    reporter = Reporter(lambda _level, text: said.append(text), None, lambda: None, None)
    run = RunContext(config, [], RunSignals(), reporter)
    runner = RequestRunner(run, None, None, None, None)  # type: ignore[arg-type]
    box, api = runner.servers
    for server, seconds in ((box, 1.0), (api, 0.25)):
        server.answers, server.tokens, server.request_s = 10, 500, 10 * seconds
    api.cost = 500 * PRICE
    planner = FleetPlanner(run, runner, CostMeter(config, []))
    lanes = [Lane("box", 200.0, 0.0, 1.0), Lane("api", 3_200.0, PRICE, 0.25)]
    planner.current = plan(lanes, 20_000, 20.0, max_cost)
    assert planner.current.cost > 0  # it buys API tokens to meet the deadline
    return planner, box, api, said


def test_the_last_answer_sent_alone_goes_to_the_fastest_lane(tmp_path: Path) -> None:
    planner, box, api, said = fleet(tmp_path)
    taken = planner.runner.reserve()
    assert taken is box  # both idle and with room: the dispatcher takes the first, the box
    assert planner.route(box, 60, lone=True) is api
    assert (box.outstanding, api.outstanding) == (0, 1)  # the slot moved with it
    assert len(said) == 1 and "its last answer, sent alone, goes to api" in said[0], said
    # An ordinary request far from the deadline stays where the dispatcher put it.
    box.outstanding += 1
    assert planner.route(box, 200, lone=False) is box


def test_a_request_the_chosen_lane_would_land_past_the_deadline_goes_faster(
    tmp_path: Path,
) -> None:
    planner, box, api, _ = fleet(tmp_path)
    assert planner.deadline_at is not None
    planner.deadline_at = time.monotonic() + 0.6  # the box takes 1 s a request, the API 0.25
    box.outstanding += 1
    assert planner.route(box, 200, lone=False) is api
    planner.deadline_at = time.monotonic() + 5.0
    api.outstanding -= 1
    box.outstanding += 1
    assert planner.route(box, 200, lone=False) is box


def test_the_cap_the_lanes_limit_and_a_plan_that_buys_nothing_keep_the_box(
    tmp_path: Path,
) -> None:
    # A cap the API answer would pass: the box. One API answer in flight (50 tokens at its
    # mean) counts against it as if spent.
    planner, box, api, _ = fleet(tmp_path, max_cost=1.0)
    api.outstanding = 1
    # Room for 50 more tokens, not 60, past the one in flight (50) and the plan's reserve
    # (the API's mean answer, 50: its answers here have no spread).
    planner.max_cost = 150 * PRICE
    box.outstanding += 1
    assert planner.route(box, 60, lone=True) is box
    assert planner.route(box, 50, lone=True) is api
    # The API's slots all taken: the box.
    planner, box, api, _ = fleet(tmp_path)
    api.outstanding = 16
    box.outstanding += 1
    assert planner.route(box, 60, lone=True) is box
    # The free box meets the deadline with time to spare: nothing is bought for its last.
    planner, box, api, _ = fleet(tmp_path)
    planner.current = plan([Lane("box", 200.0, 0.0, 1.0), Lane("api", 3_200.0, PRICE)], 500, 20.0)
    assert planner.current.cost == 0
    box.outstanding += 1
    assert planner.route(box, 60, lone=True) is box
    # ... unless its last answer would land past it there.
    assert planner.deadline_at is not None
    planner.deadline_at = time.monotonic() + 0.9  # 60 tokens take the box 1.2 s
    assert planner.route(box, 60, lone=True) is api


def test_without_a_deadline_nothing_is_rerouted(tmp_path: Path) -> None:
    planner, box, _, said = fleet(tmp_path, deadline=None)
    box.outstanding += 1
    assert planner.route(box, 60, lone=True) is box
    assert not said


def test_a_last_answer_is_weighed_and_said_at_its_likely_length_not_its_cap(
    tmp_path: Path,
) -> None:
    """Capped at a server's context, a last answer of about 60 tokens is 1.2 s on the box,
    not the 655 s its cap would take: it stays there with 5 s to go when the plan buys
    nothing, and the line that moves it says its likely times."""
    planner, box, api, said = fleet(tmp_path)
    planner.current = plan([Lane("box", 200.0, 0.0, 1.0), Lane("api", 3_200.0, PRICE)], 500, 20.0)
    assert planner.current.cost == 0 and planner.deadline_at is not None
    planner.deadline_at = time.monotonic() + 5.0
    box.outstanding += 1
    assert planner.route(box, 32_767, lone=True, likely=60) is box
    assert planner.route(box, 32_767, lone=True) is api  # by its cap: 655 s on the box
    # A plan that buys tokens sends it to the API, and says the times of 60 tokens.
    planner, box, api, said = fleet(tmp_path)
    box.outstanding += 1
    assert planner.route(box, 32_767, lone=True, likely=60) is api
    assert len(said) == 1 and "goes to api (0.3 s), not box (1.2 s)" in said[0], said
