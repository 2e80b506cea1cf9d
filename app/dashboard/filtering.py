"""The `/` filter: which panels show, and where focus goes as the bar opens and closes.

The screen routes the bar's messages here (attributes down: it hands over itself as a
:class:`FilteredBoard`); the filter only sets the panels' `display` and asks the board to
lay out and refresh again. Which panels a filter matches is decided here (`Query`) and
nowhere else: by name, and by state with `state:WORD` (`/state:stale`, `/B state:run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gen_tui.widgets.dataset_panel import DatasetPanel, PanelView, badge_for
from gen_tui.widgets.filter_bar import FilterBar

STATE_PREFIX = "state:"


@dataclass(frozen=True)
class Query:
    """A filter's text, read: the words of a name, and the states asked for (any of)."""

    name: str = ""
    states: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Query:
        words = text.strip().lower().split()
        states = tuple(
            word[len(STATE_PREFIX) :]
            for word in words
            if word.startswith(STATE_PREFIX) and len(word) > len(STATE_PREFIX)
        )
        name = " ".join(word for word in words if not word.startswith(STATE_PREFIX))
        return cls(name, states)

    def matches(self, name: str, view: PanelView | None) -> bool:
        """Its name holds the words and its state starts with one of the states asked for
        (the badge's kind, `done`, or its text, `budget reached`)."""
        if self.name not in name.lower():
            return False
        if not self.states:
            return True
        badge, kind = badge_for(view or PanelView())
        return any(kind.startswith(state) or badge.startswith(state) for state in self.states)


class FilteredBoard(Protocol):
    """What the filter needs of the dashboard."""

    @property
    def filter_bar(self) -> FilterBar: ...

    def panels(self, visible_only: bool = False) -> list[DatasetPanel]: ...

    def relayout(self) -> None: ...

    def refresh_view(self) -> None: ...

    def focus_selection(self) -> None: ...


class PanelFilter:
    """Narrows the board to the panels the bar's text matches (name, and `state:WORD`)."""

    def __init__(self, board: FilteredBoard) -> None:
        self.board = board
        self.query = Query()

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
        """Escape: every panel again, and the bar out of the way; the selection stays."""
        self.board.filter_bar.display = False
        self.apply("")
        self._focus_visible()

    def apply(self, text: str) -> None:
        self.query = Query.parse(text)
        for panel in self.board.panels():
            panel.display = self.query.matches(panel.dataset, panel.view)
        self.board.relayout()
        self.board.refresh_view()

    def restate(self, views: Mapping[str, PanelView]) -> bool:
        """A state filter again on this refresh's views (states change, names do not);
        True if a panel came or went."""
        if not self.query.states:
            return False
        changed = False
        for panel in self.board.panels():
            shown = self.query.matches(panel.dataset, views.get(panel.dataset))
            if panel.display != shown:
                panel.display = shown
                changed = True
        return changed

    def _focus_visible(self) -> None:
        self.board.focus_selection()
        self.board.relayout()
