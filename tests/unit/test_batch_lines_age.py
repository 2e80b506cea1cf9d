"""A batch line's age says nothing of its length (issue 34): it waits in the provider's queue
and comes back with its batch. The budget's rule estimates what a live request has produced
from its age (the latency line of the answers back); a batch line taken that way was, three
seconds out, an answer past the cap, and the 40 lines of a fleet's batch wave held the live
lanes back by about 8,000 tokens until they landed (bench fleet_batch at 20 s: the free box
idle 2.7 s, 2,500 tokens left when the last wave landed, the run 0.6 s late)."""

from __future__ import annotations

import time
from pathlib import Path

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import may_dispatch
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from tests.support.fleet_planner import measured_planner

CAP = 200


def test_a_batch_waves_lines_count_at_the_mean_however_long_they_are_out(
    tmp_path: Path,
) -> None:
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=20_000)],
        lanes=["box=http://box:1", "api=http://api:1,api=openai,concurrency=16,price=0/10"],
        sampling={"max_new_tokens": CAP},
    )
    # 16,800 on disk: a wave of 40 lines (about 2,000 tokens at the mean of 50) leaves room
    # for about 1,200 more, live.
    _planner, ds, _run = measured_planner(config, tmp_path / "A", 16_800)
    now = time.monotonic()

    def live_may_send(lines: list[InFlight]) -> bool:
        return may_dispatch(
            config.budget_mode,
            ds.budget,
            ds.tokens,
            ds.budget_samples,
            lines,
            ds.model,
            CAP,
            now,
            expected=ds.expected,
        )

    for out_s in (0.0, 3.0, 60.0):
        wave = [InFlight(now - out_s, CAP, ages=False) for _ in range(40)]
        assert live_may_send(wave), out_s
    # Live requests as old are answers past the cap: their age is what they have run.
    assert not live_may_send([InFlight(now - 3.0, CAP) for _ in range(40)])
    # And the lines are still counted: a second wave beside them leaves no room.
    assert not live_may_send([InFlight(now, CAP, ages=False) for _ in range(80)])
