"""A stall (no lane has room under the plan, nothing in flight) is re-planned at once when the
last plan is older than CHECK_S, and no sooner than CHECK_S after it otherwise (issue 34).
The budget's last answers on a 20 s run spent the API's share 1.2 s after the last plan;
the re-plan waited CHECK_S more, and the run ended 0.5 s late."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import fleet
from tests.support.fleet_planner import measured_planner, replan_times

CHECK_S = 1.0


def test_a_stall_long_after_the_last_plan_is_replanned_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet, "CHECK_S", CHECK_S)
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=20_000)],
        lanes=["box=http://box:1", "api=http://api:1,api=openai,concurrency=16,price=0/10"],
        deadline="20s",
        max_cost=1.0,
        plan_every=60.0,
    )
    planner, _ds, _run = measured_planner(config, tmp_path / "A", 5_000)
    planned = replan_times(planner)

    async def until(count: int) -> float:
        while len(planned) < count:
            await asyncio.sleep(0.01)
        return planned[-1]

    async def go() -> tuple[float, float, float]:
        task = asyncio.create_task(planner.run())
        first = await until(1)
        await asyncio.sleep(1.5 * CHECK_S)
        stalled = time.monotonic()
        planner.stalled.set()
        second = await until(2)
        planner.stalled.set()  # again, at once: it waits out CHECK_S from the last plan
        third = await until(3)
        task.cancel()
        return stalled - first, second - stalled, third - second

    idle, after_stall, after_second = asyncio.run(go())
    assert idle >= 1.5 * CHECK_S
    assert after_stall < 0.5 * CHECK_S  # at once (it waited CHECK_S more)
    assert after_second >= 0.9 * CHECK_S  # still at most one re-plan per CHECK_S
