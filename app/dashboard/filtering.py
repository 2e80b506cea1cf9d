"""The `/` bar: which panels show, the events pane's search, and where focus goes as the bar
opens and closes.

One bar does both, one at a time: `/` with the events pane focused searches the events,
anywhere else it filters the panels; switching clears what the other narrowed. The screen
routes the bar's messages here (attributes down: it hands over itself as a
:class:`FilteredBoard`); the filter only sets the panels' `display`, narrows the pane, and
asks the board to lay out and refresh again. Which panels a filter matches is decided here
(`Query`) and nowhere else: by name, and by state with `state:WORD` (`/state:stale`,
`/B state:run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gen_tui.app.dashboard.board import PanelBoard
from gen_tui.widgets.dataset_panel import PanelView, badge_for
from gen_tui.widgets.event_log import EventLog
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


class FilteredBoard(PanelBoard, Protocol):
    """What the filter needs of the dashboard, besides its panels: the bar, the events pane,
    and the focus back on the selection."""

    @property
    def filter_bar(self) -> FilterBar: ...

    @property
    def event_log(self) -> EventLog: ...

    def focus_selection(self) -> None: ...


class PanelFilter:
    """Narrows the board to the panels the bar's text matches (name, and `state:WORD`)."""

    def __init__(self, board: FilteredBoard) -> None:
        self.board = board
        self.query = Query()

    def open(self) -> None:
        """`/`: show the bar, aimed at the events pane if it has the focus, else at the
        panels, and type into it."""
        bar, log = self.board.filter_bar, self.board.event_log
        events = self.board.focused is log
        if events != bar.events:
            if bar.events:
                log.narrow("")
            elif bar.value:
                self.apply("")
            bar.aim(events)
            bar.value = log.needle if events else ""
        bar.display = True
        bar.focus()
        self.board.relayout()

    def changed(self, text: str) -> None:
        """Each key typed in the bar narrows what it is aimed at."""
        if self.board.filter_bar.events:
            self.board.event_log.narrow(text)
        else:
            self.apply(text)

    def submitted(self, text: str) -> None:
        """Enter keeps the filter (an empty one closes the bar) and returns to the panels,
        or to the events pane."""
        if self.board.filter_bar.events:
            self._back_to_events(close=not text)
            return
        if not text:
            self.board.filter_bar.display = False
        self._focus_visible()

    def cleared(self) -> None:
        """Escape: every panel (or event) again, and the bar out of the way; the selection
        stays."""
        if self.board.filter_bar.events:
            self._back_to_events(close=True)
            return
        self.board.filter_bar.display = False
        self.apply("")
        self._focus_visible()

    def _back_to_events(self, close: bool) -> None:
        """Enter or Escape in the events search: back to the pane (closed: all events)."""
        bar, log = self.board.filter_bar, self.board.event_log
        if close:
            log.narrow("")
            bar.aim(False)
            bar.display = False
        log.focus()
        self.board.relayout()

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
