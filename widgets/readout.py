"""A line of text that changes often: repainted in place, never re-laid out."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class Readout(Widget):
    """Like a Label, but its size comes from CSS, so an update is a repaint only.

    (A Label sized by its content asks for a layout pass on every update, which at a few
    updates a second per panel costs the UI thread more than everything else it does.)
    """

    text: reactive[str] = reactive("")

    def render(self) -> Text:
        return Text(self.text, no_wrap=True, overflow="ellipsis")
