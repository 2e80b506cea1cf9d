"""Dataset snapshots and a panel app fed them by hand, for the Pilot tests of the panels
(one home: several test modules build the same snapshots)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.quality import QualityWatch
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from tests.support.polling import wait_until
from tests.support.static_source import StaticSnapshot

T0 = 1_700_000_000.0


def quality() -> Any:
    watch = QualityWatch()
    for index in range(100):
        cut = index % 10 < 3  # 30 % cut at the cap
        watch.answer(4096 if cut else 300 + index * 20, "length" if cut else "stop", 1 + index / 10)
    for _ in range(7):
        watch.error("HTTP 500: upstream exploded")
    watch.error("timeout after 600 s")
    return watch.published()


def snapshot(name: str, **changes: Any) -> DatasetSnapshot:
    base = DatasetSnapshot(
        name=name, state=DatasetState.ACTIVE, tokens=500_000, samples=1000,
        max_tokens=2_000_000, max_samples=None, budget_mode="predictive", inflight=8, errors=8,
        malformed=0, mean_tokens=500.0, tok_s=20_000.0, samples_s=40.0, eta_s=75.0,
        resumed_tokens=0, resumed_samples=0, started_at=T0 - 100, updated_at=T0,
        last_record_at=T0, pid=4242, host="gpu-box", truncated=30, truncated_of=100,
        quality=quality(), prompts_left=600,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def run_of(*datasets: DatasetSnapshot) -> RunSnapshot:
    return RunSnapshot(datasets, 64, 8, 0.5, 100.0, 100.0, False, False)


def static_app(names: list[str], **kwargs: Any) -> tuple[GenTuiApp, StaticSnapshot]:
    static = StaticSnapshot(names, 1e9)
    return GenTuiApp(None, names=names, sources=[static], **kwargs), static


async def shown(pilot: Any, app: GenTuiApp, static: StaticSnapshot, run: RunSnapshot) -> None:
    await wait_until(lambda: app.dashboard is not None and app.dashboard.dashboard_up,
                     pause=pilot.pause)  # fmt: skip
    static.show(run, now=T0)
    assert app.dashboard is not None
    app.dashboard.refresh_view()
    await pilot.pause()
