"""The selection: which dataset the keys act on, and how it shows.

The datasets show as a grid of panels or, with `t` (the default past a dozen), as a table
of one line each; the selection is one dataset in both: the focused panel, or the table's
cursor row. With the focus elsewhere (the events pane, which tab reaches, or the filter) it
stays on the panel focused last: `k` must not move to another dataset. The arrows move it;
`t` switches the view and carries it over.

The screen hands itself over (attributes down), as to `Controls` and `Viewers`: this holds
the choice of view and the last panel, and asks the board for its widgets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from textual.app import App
from textual.screen import ModalScreen
from textual.widget import Widget

from gen_tui.app.dashboard.board import PanelBoard
from gen_tui.app.dashboard.parts import Parts
from gen_tui.app.dashboard.tabling import ViewChoice
from gen_tui.widgets.dataset_panel import DatasetPanel
from gen_tui.widgets.dataset_table import DatasetTable


class SelectingBoard(PanelBoard, Protocol):
    """What the selection needs of the dashboard, besides its panels: its widgets, the
    grid's columns, and Textual's focus and bindings."""

    @property
    def app(self) -> App[Any]: ...

    @property
    def columns(self) -> int: ...

    def live_parts(self) -> Parts | None: ...

    def panel_named(self, name: str) -> DatasetPanel | None: ...

    def set_focus(self, widget: Widget | None) -> None: ...

    def call_after_refresh(self, callback: Callable[[], object]) -> bool: ...

    def refresh_bindings(self) -> None: ...


class Selection:
    """The selected dataset, in the grid or the table (see the module docstring)."""

    def __init__(self, board: SelectingBoard) -> None:
        self.board = board
        self.view_choice = ViewChoice()
        """Grid or table (`t`); the table by default past a dozen datasets."""
        self.table_shown = False
        """The table view shows (else the grid of panels)."""
        self.last_panel: DatasetPanel | None = None
        """The panel that had the focus last: the selection while the focus is elsewhere."""

    def choose_view(self, count: int) -> bool:
        """The view for `count` datasets as the board is built; True if that is the table."""
        self.table_shown = self.view_choice.table(count)
        return self.table_shown

    def selected(self) -> DatasetPanel | None:
        """The focused panel; with the focus elsewhere, the panel focused last."""
        if self.table_shown and (parts := self.board.live_parts()) is not None:
            name = parts.table.current()
            return self.board.panel_named(name) if name is not None else None
        focused = self.board.focused
        if isinstance(focused, DatasetPanel):
            return focused
        visible = self.board.panels(visible_only=True)
        if self.last_panel is not None and self.last_panel in visible:
            return self.last_panel
        return visible[0] if visible else None

    def move(self, dx: int, dy: int) -> None:
        """An arrow: the next panel that way in the grid, the next row in the table."""
        board = self.board
        if self.table_shown and (parts := board.live_parts()) is not None:
            if board.focused is not parts.table:
                board.set_focus(parts.table)
            elif dy:
                parts.table.move(dy)
            return
        visible = board.panels(visible_only=True)
        if not visible:
            return
        current = self.selected()
        index = visible.index(current) if current in visible else 0
        if not isinstance(board.focused, DatasetPanel):
            board.set_focus(visible[index])
            return
        columns = board.columns
        column = index % columns + dx
        if not 0 <= column < columns:
            return  # → in the right column stays in its row (it used to wrap to the next)
        target = index + dx + dy * columns
        last_row = (len(visible) - 1) // columns
        if dy > 0 and target >= len(visible) and index // columns < last_row:
            target = len(visible) - 1  # ↓ above a short last row lands on its last panel
        if 0 <= target < len(visible):
            # set_focus at once, not Widget.focus (deferred to after this batch of keys):
            # a burst of arrows must each move from where the one before landed
            board.set_focus(visible[target])

    def focus_selection(self) -> None:
        """Focus the selected dataset (its panel, or the table on its row); after a filter
        closes, the one selected before it, if it shows."""
        if (parts := self.board.live_parts()) is None:
            return
        if self.table_shown:
            parts.table.select(parts.table.current())  # a row the filter hid: the first's
            self.board.set_focus(parts.table)
            return
        selected = self.selected()
        # None (a filter that matches no dataset): the focus leaves the filter bar all the
        # same, or Enter kept it there and `k` was typed into the filter (tried in tmux).
        self.board.set_focus(selected)

    def toggle_view(self) -> None:
        """`t`: the table view or the grid, on the same selected dataset."""
        if (parts := self.board.live_parts()) is None:
            return
        self.view_choice.toggle(len(self.board.panels()))
        self.switch_view(parts)

    def datasets_added(self, parts: Parts) -> None:
        """Panels were added: the view their count picks (unless `t` chose), and the focus
        on the first if nothing held it."""
        board = self.board
        if self.view_choice.table(len(board.panels())) != self.table_shown:
            self.switch_view(parts)
        elif not isinstance(board.focused, (DatasetPanel, DatasetTable)) and not isinstance(
            board.app.screen, ModalScreen
        ):
            board.call_after_refresh(self._focus_first)

    def switch_view(self, parts: Parts) -> None:
        """Show the view `view_choice` picks, the selection carried over."""
        board = self.board
        selected = self.selected()
        self.table_shown = self.view_choice.table(len(board.panels()))
        parts.board.display = not self.table_shown
        parts.table.display = self.table_shown
        board.relayout()
        board.refresh_view()
        if self.table_shown:
            parts.table.select(selected.dataset if selected is not None else None)
            board.set_focus(parts.table)
        elif selected is not None:
            self.last_panel = selected
            board.call_after_refresh(self.focus_selection)
        board.refresh_bindings()

    def _focus_first(self) -> None:
        board = self.board
        if isinstance(board.focused, (DatasetPanel, DatasetTable)):
            return
        if self.table_shown and (parts := board.live_parts()) is not None:
            parts.table.focus()
            return
        visible = board.panels(visible_only=True)
        if visible:
            visible[0].focus()
