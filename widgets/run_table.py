"""The run list: one row per generation process on every watched host.

Knows nothing of hosts or SSH: it is handed :class:`RunRow` values and shows them, adding,
removing and rewriting only the rows and cells that changed, so the cursor stays on the run
the user picked while the list refreshes under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.format import format_duration
from gen_tui.widgets.keyed_table import KeyedTable

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


class RunTable(KeyedTable):
    """Runs as rows; the cursor selects one for `k` and `r`."""

    COLUMNS = COLUMNS
    WIDTHS = WIDTHS

    def show(self, rows: Sequence[RunRow]) -> None:
        self.show_cells({row.key: row.cells() for row in rows})
