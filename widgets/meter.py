"""A one-line bar with its figure on the right: `━━━━━━━━━━──────── 6.4M / 10M`."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class Meter(Widget):
    """A horizontal bar filled to `fraction`, followed by `label`.

    With `fraction` None (nothing to measure against, e.g. no sample cap) only the label is
    shown. The filled and empty parts use heavy and light rules, so the bar stays readable
    without colour (a `tmux capture-pane`, a monochrome terminal).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"meter--filled", "meter--empty", "meter--label"}

    fraction: reactive[float | None] = reactive(None)
    label: reactive[str] = reactive("")

    FILLED = "━"
    EMPTY = "─"

    def render(self) -> Text:
        width = self.size.width
        label = self.label
        label_style = self.get_component_rich_style("meter--label")
        if self.fraction is None:
            return Text(label, style=label_style, no_wrap=True, overflow="ellipsis")
        bar_width = max(0, width - len(label) - 1)
        if bar_width < 4:
            return Text(label, style=label_style, no_wrap=True, overflow="ellipsis")
        fraction = min(1.0, max(0.0, self.fraction))
        filled = round(bar_width * fraction)
        if fraction > 0 and filled == 0:
            filled = 1
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(self.FILLED * filled, style=self.get_component_rich_style("meter--filled"))
        text.append(
            self.EMPTY * (bar_width - filled), style=self.get_component_rich_style("meter--empty")
        )
        text.append(" ")
        text.append(label, style=label_style)
        return text
