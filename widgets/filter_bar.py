"""The `/` filter: a one-line input that narrows the panels to names containing its text."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    """Enter keeps the filter and returns to the panels; Escape clears it."""

    BINDINGS = [
        Binding("escape", "clear", "Clear filter", tooltip="Show every dataset", id="filter.clear"),
    ]

    class Cleared(Message):
        """The user dismissed the filter with Escape."""

    PANELS = "filter datasets by name; state:stale, state:running... by state"
    EVENTS = "search the events (Enter keeps it, Escape clears it)"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder=self.PANELS, id=id)
        self.events = False
        """What it narrows: the events pane (`/` with the pane focused), else the panels."""

    def aim(self, events: bool) -> None:
        """Narrow the events pane (True) or the panels (False) from now on."""
        self.events = events
        self.placeholder = self.EVENTS if events else self.PANELS

    def action_clear(self) -> None:
        self.value = ""
        self.post_message(self.Cleared())
