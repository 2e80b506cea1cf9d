"""The plan is redone more often as the deadline nears (issue 34): every `--plan-every`
(60 s) far from it, a tenth of the time left within ten of those, never more often than
PLAN_MIN_S. The default re-planned a 60 s run once, from its first answers; and a priced
lane is paced by the interval the plan will hold for, not by `--plan-every`."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import fleet
from tests.support.fleet_planner import measured_planner, replan_times


def config(tmp_path: Path, deadline: str | None, plan_every: float = 60.0) -> EngineConfig:
    return EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=200_000)],
        lanes=["box=http://box:1", "api=http://api:1,api=openai,concurrency=16,price=0/10"],
        deadline=deadline,
        max_cost=10.0,
        plan_every=plan_every,
    )


def test_the_interval_shrinks_with_the_time_left(tmp_path: Path) -> None:
    planner, _, _ = measured_planner(config(tmp_path, "8h"), tmp_path / "A", 0)
    assert planner.deadline_at is not None
    end = planner.deadline_at
    assert planner.interval(end - 3_600) == 60  # an hour out: --plan-every
    assert planner.interval(end - 600) == 60  # ten intervals out: still
    assert planner.interval(end - 120) == pytest.approx(12)
    assert planner.interval(end - 20) == fleet.PLAN_MIN_S  # not under 5 s
    assert planner.interval(end + 5) == fleet.PLAN_MIN_S  # past it, too
    # A shorter --plan-every holds as it was; no deadline, --plan-every.
    short, _, _ = measured_planner(config(tmp_path, "8h", 2.0), tmp_path / "A", 0)
    assert short.deadline_at is not None and short.interval(short.deadline_at - 20) == 2.0
    none, _, _ = measured_planner(config(tmp_path, None), tmp_path / "A", 0)
    assert none.interval(time.monotonic()) == 60


def test_a_short_deadline_is_replanned_many_times_at_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet, "PLAN_MIN_S", 0.2)
    planner, _, _ = measured_planner(config(tmp_path, "4s"), tmp_path / "A", 0)
    planned = replan_times(planner)

    async def go() -> None:
        task = asyncio.create_task(planner.run())
        await asyncio.sleep(3.0)
        task.cancel()

    asyncio.run(go())
    # 4 s out: 0.4 s, then shorter, 0.2 s at the end: about ten plans in 3 s, where
    # --plan-every (60 s) alone makes one.
    assert len(planned) >= 8, planned
    gaps = [b - a for a, b in itertools.pairwise(planned)]
    assert gaps[0] > gaps[-1] >= 0.15, gaps


def test_a_priced_lane_is_paced_by_the_interval_the_plan_holds_for(tmp_path: Path) -> None:
    planner, _, _ = measured_planner(config(tmp_path, "100s"), tmp_path / "A", 0)
    planner.replan()
    made = planner.current
    assert made is not None and made.tokens["api"] > 0, made
    api = planner.runner.servers[1]
    every = planner.interval(time.monotonic())
    assert 9 < every <= 10  # a tenth of the 100 s left, not --plan-every's 60
    share = made.tokens["api"] * every / made.finish_s
    assert api.allowance == pytest.approx(share, rel=0.02)
