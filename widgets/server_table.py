"""The servers view's table: a line per supervised server (state in words, restarts,
uptime, pid or job, host, GPUs, its /metrics load, its log's last line).

The columns a user needs first come first and are no wider than their words: at 80
columns the name, state, restarts, uptime and pid show without scrolling sideways (the
log's last line, the widest, comes last, and the view says it in full under the table)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gen_tui.backends.servers.view import ServerRow, ref_text, state_words, uptime
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.keyed_table import KeyedTable

COLUMNS = (
    *("server", "state", "restarts", "up", "pid/job", "host", "gpus", "load", "last log line"),
)
WIDTHS = {"server": 10, "state": 37, "restarts": 8, "up": 6, "pid/job": 9, "host": 8, "gpus": 9}
"""`state` holds "restarting in 300 s (exited: SIGKILL)" whole; `up` "59m59s" and "23h59m"."""
LAST_LINE_CHARS = 200
"""A log line is another program's text: one line, this long at most."""


def row_cells(row: ServerRow, load: str, now: float | None = None) -> tuple[str, ...]:
    """The row's cells as plain strings (the table draws them as Text, never markup)."""
    return (
        one_line(row.name, 64),
        state_words(row, now),
        str(row.restarts),
        uptime(row, now),
        ref_text(row),
        one_line(row.host, 64),
        one_line(row.gpus, 32),
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
