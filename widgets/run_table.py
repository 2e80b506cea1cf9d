"""The run list: one row per generation process on every watched host.

Knows nothing of hosts or SSH: it is handed :class:`RunRow` values and shows them, adding,
removing and rewriting only the rows and cells that changed, so the cursor stays on the run
the user picked while the list refreshes under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.format import format_duration

COLUMNS = ("host", "pid", "state", "elapsed", "datasets", "command")
WIDTHS = {"pid": 7, "state": 12, "elapsed": 8}
"""Fixed widths where the text changes ("writing" -> "stopping 12s"); the rest fit content."""
COMMAND_CHARS = 500
"""The most of a command line the list shows (a run's details, Enter, and the confirmation
dialogs show it whole)."""


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


class RunTable(DataTable[Text]):
    """Runs as rows; the cursor selects one for `k` and `r`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._shown: dict[str, tuple[str, ...]] = {}

    def on_mount(self) -> None:
        for name in COLUMNS:
            self.add_column(name, key=name, width=WIDTHS.get(name))

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value

    def show(self, rows: Sequence[RunRow]) -> None:
        wanted = {row.key: row.cells() for row in rows}
        for key in [key for key in self._shown if key not in wanted]:
            self.remove_row(key)
            del self._shown[key]
        for key, cells in wanted.items():
            old = self._shown.get(key)
            if old is None:
                # Text, not str: a str cell is read as Rich markup, and a command line
                # holding "[/x]" would end the app.
                self.add_row(*map(Text, cells), key=key)
            elif old != cells:
                for column, (was, now) in zip(COLUMNS, zip(old, cells, strict=True), strict=True):
                    if was != now:
                        self.update_cell(key, column, Text(now))
            self._shown[key] = cells
