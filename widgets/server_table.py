"""The servers view's table: a line per supervised server (state in words, pid or job,
host, GPUs, uptime, restarts, its /metrics load, its log's last line)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gen_tui.backends.servers.view import ServerRow, ref_text, state_words, uptime
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.keyed_table import KeyedTable

COLUMNS = (
    *("server", "state", "pid/job", "host", "gpus", "up", "restarts", "load", "last log line"),
)
WIDTHS = {"server": 12, "state": 24, "pid/job": 10, "host": 10, "gpus": 9, "up": 7, "restarts": 8}
LAST_LINE_CHARS = 200
"""A log line is another program's text: one line, this long at most."""


def row_cells(row: ServerRow, load: str, now: float | None = None) -> tuple[str, ...]:
    """The row's cells as plain strings (the table draws them as Text, never markup)."""
    return (
        one_line(row.name, 64),
        state_words(row, now),
        ref_text(row),
        one_line(row.host, 64),
        one_line(row.gpus, 32),
        uptime(row, now),
        str(row.restarts),
        one_line(load, 80),
        one_line(row.last_line, LAST_LINE_CHARS),
    )


class ServerTable(KeyedTable):
    """Servers as rows; the cursor selects one for the view's keys."""

    COLUMNS = COLUMNS
    WIDTHS = WIDTHS

    def cells(self, name: str) -> tuple[str, ...] | None:
        """What the row of `name` shows now (None: not listed)."""
        return self._shown.get(name)

    def show(self, rows: Sequence[ServerRow], loads: Mapping[str, str]) -> None:
        """Show `rows` (`loads`: each URL's load as the strip says it), cell by cell."""
        self.show_cells({row.name: row_cells(row, loads.get(row.url, "-")) for row in rows})
