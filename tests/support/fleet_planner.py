"""A fleet planner over measured lanes, with no server behind them: the bench's box (4 slots,
1 s a request) and API (16 in flight, 0.25 s), for the plan's unit tests (its margin, its
routes, the batch lane's rule)."""

from __future__ import annotations

import random
import time
from pathlib import Path

from gen_tui.backends.config.run import EngineConfig
from gen_tui.backends.engine.context import RunContext
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.fleet import FleetPlanner
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.engine.runner import RequestRunner
from gen_tui.backends.engine.signals import RunSignals

BOX_S, API_S = (1.0, 0.3), (0.25, 0.07)
"""Mean and deviation of a request's time on the simulator's box and API (bench fleet_plan)."""


def measured_planner(
    config: EngineConfig, folder: Path, done: int, answers: int = 200
) -> tuple[FleetPlanner, DatasetRun, RunContext]:
    """A planner over `config`'s live lanes (the box, then the API), each with 100 answers
    of 50 tokens at BOX_S and API_S, and its first dataset with `done` tokens on disk, its
    lengths learned from `answers` answers of about 50 (15 of spread)."""
    cap = int(config.sampling.get("max_new_tokens") or 200)
    ds = DatasetRun(config.datasets[0], folder, cap, config.budget_mode)
    rng = random.Random(7)
    for _ in range(answers):
        length = max(1, round(rng.gauss(50, 15)))
        ds.model.observe(length, length / 50)
        ds.expected.observe(length)
    ds.tokens = done
    reporter = Reporter(lambda _level, _text: None, None, lambda: None, None)
    run = RunContext(config, [ds], RunSignals(), reporter)
    runner = RequestRunner(run, None, None, None, None)  # type: ignore[arg-type]
    times = (BOX_S, API_S)[: len(runner.servers)]  # one server: the box's alone
    for server, (mean, sd) in zip(runner.servers, times, strict=True):
        server.answers, server.tokens = 100, 5_000
        server.request_s = 100 * mean
        server.request_s2 = 100 * (mean * mean + sd * sd)
        server.first_sent = time.monotonic() - 10
    runner.servers[-1].cost = 5_000 * 10e-6 if len(runner.servers) > 1 else 0.0
    return FleetPlanner(run, runner, CostMeter(config, [])), ds, run


def replan_times(planner: FleetPlanner) -> list[float]:
    """A list that gets the time of each of `planner`'s re-plans from now on (its `run`
    loop's, for the cadence's tests)."""
    planned: list[float] = []
    replan = planner.replan

    def counted() -> object:
        planned.append(time.monotonic())
        return replan()

    planner.replan = counted  # type: ignore[method-assign,assignment]
    return planned
