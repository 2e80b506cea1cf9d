"""Lines of pieces, for the widgets drawn with Textual's Line API (the dataset panel and
the dataset table): a piece is a run of text and the component classes it is drawn in.

Why one place: both widgets turn the same kind of line into a strip with their theme's
component styles (`panel--NAME`, `table--NAME` in tui.tcss), and a style is the same for
every frame until the theme or the focus changes, so each set of names is made once and
kept until `clear`.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

Piece = tuple[str, tuple[str, ...]]
"""A run of text and the component classes (without their widget's prefix) it is drawn in."""
Line = tuple[Piece, ...]


class PieceStyles:
    """The styles of a widget's pieces: its own colours beneath its `PREFIX--NAME` parts'."""

    def __init__(self, widget: Widget, prefix: str) -> None:
        self.widget = widget
        self.prefix = prefix
        self._made: dict[tuple[str, ...], Style] = {}

    def clear(self) -> None:
        """Forget what was made (the theme or the focus changed)."""
        self._made.clear()

    def style(self, names: tuple[str, ...]) -> Style:
        style = self._made.get(names)
        if style is None:
            style = self.widget.rich_style
            for name in names:
                style += self.widget.get_component_rich_style(f"{self.prefix}--{name}")
            self._made[names] = style
        return style

    def strip(self, line: Line, width: int) -> Strip:
        """`line` drawn, cut or padded to `width` cells in the widget's own style."""
        segments = [Segment(text, self.style(names)) for text, names in line]
        return Strip(segments).adjust_cell_length(width, self.style(()))
