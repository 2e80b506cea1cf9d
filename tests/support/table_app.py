"""The panel app fed snapshots by hand, as the table view's tests see it: a snapshot
without quality figures (the table's columns), the board and the table's drawn lines."""

from __future__ import annotations

import dataclasses
from typing import Any

from gen_tui.app.dashboard.screen import DashboardScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.widgets.dataset_table import DatasetTable
from tests.support.polling import wait_until
from tests.support.static_source import StaticSnapshot

T0 = 1_700_000_000.0


def snapshot(name: str, **changes: Any) -> DatasetSnapshot:
    base = DatasetSnapshot(
        name=name, state=DatasetState.ACTIVE, tokens=500_000, samples=1000,
        max_tokens=2_000_000, max_samples=None, budget_mode="predictive", inflight=8, errors=0,
        malformed=0, mean_tokens=500.0, tok_s=20_000.0, samples_s=40.0, eta_s=75.0,
        resumed_tokens=0, resumed_samples=0, started_at=T0 - 100, updated_at=T0,
        last_record_at=T0, pid=4242, host="gpu-box",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def run_of(*datasets: DatasetSnapshot) -> RunSnapshot:
    return RunSnapshot(datasets, 64, 8, 0.5, 100.0, 100.0, False, False)


def static_app(names: list[str], stale_after_s: float = 1e9) -> tuple[GenTuiApp, StaticSnapshot]:
    static = StaticSnapshot(names, stale_after_s)
    return GenTuiApp(None, names=names, sources=[static]), static


def board(app: GenTuiApp) -> DashboardScreen:
    assert app.dashboard is not None
    return app.dashboard


async def shown(pilot: Any, app: GenTuiApp, static: StaticSnapshot, run: RunSnapshot) -> None:
    await wait_until(lambda: app.dashboard is not None and app.dashboard.dashboard_up,
                     pause=pilot.pause)  # fmt: skip
    static.show(run, now=T0)
    board(app).refresh_view()
    await pilot.pause()


def table(app: GenTuiApp) -> DatasetTable:
    return app.screen.query_one("#table", DatasetTable)


def table_text(app: GenTuiApp) -> list[str]:
    """The table's lines as drawn now (the header first)."""
    rows = table(app)
    return [rows.render_line(y).text for y in range(rows.size.height)]


def selected(app: GenTuiApp) -> str | None:
    panel = board(app).selected()
    return panel.dataset if panel is not None else None
