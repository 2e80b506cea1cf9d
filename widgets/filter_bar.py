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

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder="filter datasets by name", id=id)

    def action_clear(self) -> None:
        self.value = ""
        self.post_message(self.Cleared())
