"""A DataTable whose rows carry stable keys and are rewritten cell by cell.

The run list and the servers view both refresh every second or so under a user who is
moving the cursor: rebuilding the table would jump the cursor to the top and flicker. This
base adds, removes and rewrites only the rows and cells that changed, so the cursor stays on
the row the user picked, and draws every cell as :class:`~rich.text.Text`, never markup (a
cell is another program's text: a str cell holding "[/x]" would end the app).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual.widgets import DataTable


def cell_text(cell: str) -> Text:
    """A cell as drawn: cut with an ellipsis where its column is narrower (the run list's
    command, fitted to the screen), never wrapped."""
    return Text(cell, overflow="ellipsis", no_wrap=True)


class KeyedTable(DataTable[Text]):
    """Rows keyed by a stable string; a subclass names its `COLUMNS` and fixed `WIDTHS`."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()
    WIDTHS: ClassVar[Mapping[str, int]] = {}
    """Fixed widths where the text changes length from one refresh to the next; the rest fit
    their content."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._shown: dict[str, tuple[str, ...]] = {}

    def on_mount(self) -> None:
        for name in self.COLUMNS:
            self.add_column(name, key=name, width=self.WIDTHS.get(name))

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor (None: the table is empty)."""
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value

    def show_cells(self, wanted: Mapping[str, tuple[str, ...]]) -> None:
        """Make the table show `wanted` (key -> the row's cells, in `COLUMNS` order),
        touching only what changed since the last call."""
        for key in [key for key in self._shown if key not in wanted]:
            self.remove_row(key)
            del self._shown[key]
        for key, cells in wanted.items():
            old = self._shown.get(key)
            if old is None:
                self.add_row(*map(cell_text, cells), key=key)
            elif old != cells:
                for column, (was, now) in zip(
                    self.COLUMNS, zip(old, cells, strict=True), strict=True
                ):
                    if was != now:
                        self.update_cell(key, column, cell_text(now))
            self._shown[key] = cells
