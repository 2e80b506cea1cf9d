"""Grid or table: which view the dashboard shows, and how much room the table takes.

The grid suits a handful of datasets (a panel each, with bars and a chart); past
TABLE_ABOVE the table is the default (one line each, sortable). `t` switches; from then on
the user's choice holds, whatever datasets come and go.
"""

from __future__ import annotations

from dataclasses import replace

from gen_tui.app.dashboard.rules import MIN_LOG_ROWS, Layout
from gen_tui.widgets.dataset_table import HEADER

TABLE_ABOVE = 12
"""More datasets than this open in the table view."""


class ViewChoice:
    """The table view or the grid: the default by count until `t` is pressed."""

    def __init__(self) -> None:
        self.chosen: bool | None = None

    def table(self, count: int) -> bool:
        """The table shows (for `count` datasets)."""
        return self.chosen if self.chosen is not None else count > TABLE_ABOVE

    def toggle(self, count: int) -> bool:
        """`t`: the other view, kept from now on; True if that is the table."""
        self.chosen = not self.table(count)
        return self.chosen


def table_layout(grid: Layout, height: int, rows: int, extra_rows: int) -> tuple[Layout, int]:
    """(layout, table height) with the table shown: the events log only where the whole
    table and MIN_LOG_ROWS of events fit (0: the table takes the board's whole height)."""
    chrome = 2 + extra_rows
    wanted = rows + HEADER
    log = height - chrome - wanted >= MIN_LOG_ROWS
    return replace(grid, log=log), wanted if log else 0
