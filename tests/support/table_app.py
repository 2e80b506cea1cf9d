"""The panel app fed snapshots by hand, as the table view's tests see it: a snapshot
without quality figures (the table's columns), the board and the table's drawn lines.
Built on panel_snapshots.py (the same app, snapshot and run), so the two never drift."""

from __future__ import annotations

from typing import Any

from gen_tui.app.dashboard.screen import DashboardScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.widgets.dataset_table import DatasetTable
from tests.support.panel_snapshots import T0, run_of, shown
from tests.support.panel_snapshots import snapshot as panel_snapshot
from tests.support.static_source import StaticSnapshot

__all__ = [
    "T0",
    "board",
    "run_of",
    "selected",
    "shown",
    "snapshot",
    "static_app",
    "table",
    "table_text",
]

TABLE_PLAIN = {
    "errors": 0,
    "truncated": 0,
    "truncated_of": 0,
    "quality": None,
    "prompts_left": None,
}
"""What the panels' snapshot has and the table's columns leave out: no errors, cut answers or
quality figures, so each table test sets only the figure it shows."""


def snapshot(name: str, **changes: Any) -> DatasetSnapshot:
    """The panels' snapshot of `name` (panel_snapshots.py) without its quality figures."""
    return panel_snapshot(name, **{**TABLE_PLAIN, **changes})


def static_app(names: list[str], stale_after_s: float = 1e9) -> tuple[GenTuiApp, StaticSnapshot]:
    static = StaticSnapshot(names, stale_after_s)
    return GenTuiApp(None, names=names, sources=[static]), static


def board(app: GenTuiApp) -> DashboardScreen:
    assert app.dashboard is not None
    return app.dashboard


def table(app: GenTuiApp) -> DatasetTable:
    return app.screen.query_one("#table", DatasetTable)


def table_text(app: GenTuiApp) -> list[str]:
    """The table's lines as drawn now (the header first)."""
    rows = table(app)
    return [rows.render_line(y).text for y in range(rows.size.height)]


def selected(app: GenTuiApp) -> str | None:
    panel = board(app).selected()
    return panel.dataset if panel is not None else None
