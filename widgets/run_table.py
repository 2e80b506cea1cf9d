"""The run list: one row per generation process on every watched host.

Knows nothing of hosts or SSH: it is handed :class:`RunRow` values and shows them, adding,
removing and rewriting only the rows and cells that changed, so the cursor stays on the run
the user picked while the list refreshes under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from textual import events
from textual.widgets.data_table import ColumnKey

from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.format import format_duration
from gen_tui.widgets.keyed_table import KeyedTable

COLUMNS = ("host", "pid", "state", "elapsed", "datasets", "command")
WIDTHS = {"pid": 7, "state": 12, "elapsed": 8}
"""Fixed widths where the text changes ("writing" -> "stopping 12s"); the rest fit content."""
COMMAND_CHARS = 500
"""The most of a command line the list shows (a run's details, Enter, and the confirmation
dialogs show it whole)."""
MIN_COMMAND = 12
"""The least of a command the list shows, cut to the screen's width (a narrow screen scrolls
sideways to it rather than hide it)."""


@dataclass(frozen=True)
class RunRow:
    key: str
    """Stable across refreshes: host, pid and start time."""
    host: str
    pid: int
    state: str
    """writing, running, paused, stopping 12s, ended."""
    elapsed_s: float
    datasets: tuple[str, ...]
    command: str

    def cells(self) -> tuple[str, ...]:
        """The row's texts; a command line or dataset name is shown as the process has it,
        but as one line, with control characters made visible."""
        return tuple(
            one_line(text, COMMAND_CHARS)
            for text in (
                self.host,
                str(self.pid),
                self.state,
                format_duration(self.elapsed_s),
                ", ".join(self.datasets) or "-",
                self.command,
            )
        )


class RunTable(KeyedTable):
    """Runs as rows; the cursor selects one for `k` and `r`."""

    COLUMNS = COLUMNS
    WIDTHS = WIDTHS

    def show(self, rows: Sequence[RunRow]) -> None:
        self.show_cells({row.key: row.cells() for row in rows})
        self.call_after_refresh(self._fit_command)  # once the other columns are measured

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._fit_command)  # once its regions are the new size

    def _fit_command(self) -> None:
        """The command column as wide as the table leaves it, its text cut there with an
        ellipsis (`i` shows it whole). A command wider than the screen made the table scroll
        sideways, and its horizontal scrollbar's thumb, dark on dark in tmux's 256 colours,
        showed only its end: a stray "▎" or "▌" at column 69 of the list at 160x48 (issue
        31). A column is set only when that changes (none before the table has a width)."""
        width = self.scrollable_content_region.width
        column = self.columns.get(ColumnKey("command"))
        if width <= 0 or column is None:
            return
        others = sum(c.get_render_width(self) for c in self.columns.values() if c is not column)
        room = max(MIN_COMMAND, width - others - 2 * self.cell_padding)
        fits = column.content_width <= room
        if fits == column.auto_width and (fits or column.width == room):
            return
        column.auto_width = fits
        column.width = column.content_width if fits else room
        # DataTable has no public way to set a column's width: its own steps on a change,
        # the test of this (test_tui_run_list_width.py) tells if a Textual release moves them.
        self._clear_caches()  # the cells drawn at the old width
        self._require_update_dimensions = True  # its virtual size, from the new width
        self.refresh()
