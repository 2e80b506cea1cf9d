"""What the full-screen tables (the run list, the servers view) share: the row moves and
the way back to the panels.

The moves carry the dashboard's binding ids (`move.up`, `move.down`), so `[keys]` and
`vim = true` remap them on every screen at once; a screen lists :data:`ROW_MOVES` in its own
`BINDINGS` (not inherited) because the config check reads each screen's list by name.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType
from textual.screen import Screen

from gen_tui.widgets.keyed_table import KeyedTable

ROW_MOVES: tuple[BindingType, ...] = (
    Binding("up", "cursor(-1)", "Up", show=False, id="move.up"),
    Binding("down", "cursor(1)", "Down", show=False, id="move.down"),
)


class TableScreen(Screen[None]):
    """A screen around one :class:`KeyedTable`, closed back to the panels."""

    def action_cursor(self, by: int) -> None:
        """A move key the table does not take itself (vim's j and k)."""
        table = self.query_one(KeyedTable)
        if by < 0:
            table.action_cursor_up()
        else:
            table.action_cursor_down()

    def action_close(self) -> None:
        self.dismiss(None)
