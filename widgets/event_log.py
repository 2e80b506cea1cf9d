"""The dashboard's events pane: lines wrapped at the pane's own width, pinned to the newest.

A plain `RichLog` wraps a line once, at the width it has when the line is written: lines
written before the pane was shown came out ~80 columns wide on a 160-column screen, lines
written before the scrollbar came ran under it, and a narrower screen cut them with no sign.
This one keeps the events' text and wraps them again whenever the width changes, keeps a
scrollbar's room always (so the text never moves under it), shows an event in at most
`MAX_ROWS` rows ending in "…", and stays on the newest line through a relayout unless the
reader has scrolled up (issue 31 point 10).
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

from rich.text import Text
from textual.content import Content
from textual.events import Resize
from textual.widgets import RichLog

MAX_ROWS = 3
"""Rows an event may take; past them it ends in an ellipsis (`L` shows it whole)."""


class EventLog(RichLog):
    """The events pane: plain-text lines, rewrapped at each width, focusable, following."""

    DEFAULT_CSS: ClassVar[str] = """
    EventLog {
        scrollbar-gutter: stable;
        overflow-x: hidden;
        overflow-y: auto;
    }
    """

    def __init__(self, *, max_events: int = 500, id: str | None = None) -> None:
        """`max_events`: the events kept (each takes up to `MAX_ROWS` rows)."""
        super().__init__(
            id=id,
            markup=False,
            wrap=True,
            max_lines=max_events * MAX_ROWS,
            min_width=1,
            auto_scroll=False,
        )
        self.texts: deque[str] = deque(maxlen=max_events)
        """Every event kept, as written: rewrapped from here when the width changes."""
        self.pinned = True
        """Following the newest line; False once the reader scrolls up, True at the end."""
        self.needle = ""
        """`/` on the pane: only the events that contain it (any case) show."""
        self._width = 0

    @property
    def wrap_width(self) -> int:
        """The columns a row may take: the pane less its padding and the scrollbar's room."""
        return self.scrollable_content_region.width

    def add(self, line: str) -> None:
        """Append one event (plain text: never read as markup)."""
        self.texts.append(line)
        width = self.wrap_width
        if not self._size_known or width <= 0:
            return  # wrapped once the pane has a size (on_resize)
        if not self._matches(line):
            return
        if width != self._width:
            self._rewrap(width)
        else:
            self._put(line, width)
        self._follow()

    def rows(self, line: str, width: int) -> list[Text]:
        """`line` wrapped at `width`: at most `MAX_ROWS` rows, the last ending in "…" if cut."""
        wrapped = list(Text(line).wrap(self.app.console, width, overflow="fold"))
        if len(wrapped) <= MAX_ROWS:
            return wrapped or [Text("")]
        rows = wrapped[:MAX_ROWS]
        last = rows[-1]
        last.rstrip()
        last.truncate(max(width - 1, 0))
        last.append("…")
        return rows

    def _put(self, line: str, width: int) -> None:
        for row in self.rows(line, width):
            self.write(row, width=width, scroll_end=False)

    def narrow(self, needle: str) -> int:
        """Show only the events containing `needle` (any case; "" shows them all), newest
        in view; the pane's title says what it is narrowed to. Returns how many match."""
        self.needle = needle.strip().lower()
        shown = sum(1 for line in self.texts if self._matches(line))
        title = "events"
        if self.needle:
            title = f"events with “{needle.strip()}”: {shown} of {len(self.texts)}"
        self.border_title = Content(title)  # plain text: what was typed is never markup
        self.pinned = True
        if self._size_known and self.wrap_width > 0:
            self._rewrap(self.wrap_width)
            self._follow()
        return shown

    def _matches(self, line: str) -> bool:
        return not self.needle or self.needle in line.lower()

    def _rewrap(self, width: int) -> None:
        pinned = self.pinned  # the clear scrolls to the top and back: not the reader's doing
        self._width = width
        self.clear()
        for line in self.texts:
            if self._matches(line):
                self._put(line, width)
        self.pinned = pinned

    def _follow(self) -> None:
        if self.pinned:
            self.scroll_end(animate=False, immediate=False, x_axis=False)

    def on_resize(self, event: Resize) -> None:
        """A new width rewraps every event; a new height keeps the newest line in view.

        Runs before RichLog's own handler, which marks the size known: done here first so
        the rewrap is not deferred."""
        if not event.size.width:
            return
        self._size_known = True
        width = self.wrap_width
        if width > 0 and width != self._width:
            self._rewrap(width)
        if self.pinned:
            self.call_after_refresh(self._follow)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """Scrolling up lets the reader stay put; back at the end, it follows again."""
        super().watch_scroll_y(old_value, new_value)
        if new_value < old_value:
            self.pinned = new_value >= self.max_scroll_y
        elif new_value >= self.max_scroll_y:
            self.pinned = True
