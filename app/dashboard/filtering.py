"""The `/` filter: which panels show, and where focus goes as the bar opens and closes.

The screen routes the bar's messages here (attributes down: it hands over itself as a
:class:`FilteredBoard`); the filter only sets the panels' `display` and asks the board to
lay out and refresh again. Which panels a name matches is decided here and nowhere else.
"""

from __future__ import annotations

from typing import Protocol

from gen_tui.widgets.dataset_panel import DatasetPanel
from gen_tui.widgets.filter_bar import FilterBar


class FilteredBoard(Protocol):
    """What the filter needs of the dashboard."""

    @property
    def filter_bar(self) -> FilterBar: ...

    def panels(self, visible_only: bool = False) -> list[DatasetPanel]: ...

    def relayout(self) -> None: ...

    def refresh_view(self) -> None: ...


class PanelFilter:
    """Narrows the board to the panels whose dataset name contains the bar's text."""

    def __init__(self, board: FilteredBoard) -> None:
        self.board = board

    def open(self) -> None:
        """`/`: show the bar and type into it."""
        bar = self.board.filter_bar
        bar.display = True
        bar.focus()
        self.board.relayout()

    def submitted(self, text: str) -> None:
        """Enter keeps the filter (an empty one closes the bar) and returns to the panels."""
        if not text:
            self.board.filter_bar.display = False
        self._focus_visible()

    def cleared(self) -> None:
        """Escape: every panel again, and the bar out of the way."""
        self.board.filter_bar.display = False
        self.apply("")
        self._focus_visible()

    def apply(self, text: str) -> None:
        needle = text.strip().lower()
        for panel in self.board.panels():
            panel.display = needle in panel.dataset.lower()
        self.board.relayout()
        self.board.refresh_view()

    def _focus_visible(self) -> None:
        visible = self.board.panels(visible_only=True)
        if visible:
            visible[0].focus()
        self.board.relayout()
