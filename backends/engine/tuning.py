"""`--concurrency auto` wired into a run: the tuner (autotune.py) fed by each read of the
servers' /metrics, its moves told once each in the run's log, and the dispatcher woken when
the target grows (room for more is used now, not at the next answer back).
"""

from __future__ import annotations

import math
import time

from gen_tui.backends.engine.autotune import ConcurrencyTuner
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.runner import RequestRunner
from gen_tui.backends.engine.slots import SlotPool
from gen_tui.backends.engine.telemetry import ServerTelemetry

AUTO_READ_S = 1.0
"""How often auto reads the servers (at most): the tuner needs fresher figures than a panel."""


class AutoConcurrency(RunPart):
    """The pool's target under `--concurrency auto`."""

    def __init__(self, run: RunContext, pool: SlotPool) -> None:
        super().__init__(run)
        self._pool = pool
        self._telemetry: ServerTelemetry | None = None
        self.tuner = ConcurrencyTuner(
            pool, self.config.max_concurrency, self.config.hooks.auto_start, on_move=self._moved
        )
        self.reporter.event(
            "info",
            f"concurrency auto: starting at {pool.concurrency}, "
            f"at most {self.config.max_concurrency} in flight",
        )

    @property
    def reason(self) -> str:
        """Why the target is where it is (the status line's short form)."""
        return self.tuner.reason

    def attach(self, telemetry: ServerTelemetry) -> None:
        """Read the servers through `telemetry`, at least every AUTO_READ_S."""
        self._telemetry = telemetry
        telemetry.interval_s = min(AUTO_READ_S, self.config.metrics_interval_s)

    async def limit(self, runner: RequestRunner) -> None:
        """Never more in flight than the servers run (their max_running_requests) plus a
        small queue; asked once, before the first request."""
        self.tuner.limit_to(await runner.capacities())

    def tune(self) -> None:
        """Move the target after a read of the servers (telemetry's `on_read`)."""
        if self._telemetry is None:
            return
        loads = [self._telemetry.latest.get(url) for url in self._telemetry.urls]
        before = self._pool.concurrency
        self.tuner.observe(
            loads, sum(ds.tokens for ds in self.datasets), time.monotonic(), self.budget_room()
        )
        if self._pool.concurrency > before:
            self.signals.wake.set()

    def budget_room(self) -> int | None:
        """About how many answers the unfinished datasets' token budgets still hold, at
        each one's expected answer (`budget/expected.py`: the cap until answers are back);
        None when one has no token budget (only the servers bound it then)."""
        room = 0
        for ds in self.datasets:
            if ds.state.finished:
                continue
            if ds.budget.max_tokens is None:
                return None
            left = max(0, ds.budget.max_tokens - ds.tokens)
            room += math.ceil(left / ds.expected.mean(len(ds.inflight)))
        return room

    def _moved(self, before: int, after: int, why: str) -> None:
        self.reporter.event("info", f"concurrency auto: {before} -> {after}: {why}")
