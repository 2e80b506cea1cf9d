"""The plot view's two charts: tokens over time with the budget line, and tok/s over time,
one above the other on one time axis (labelled under the lower).

Why textual-plotext: its braille lines and axes with ticks are what a person reads a night's
timeline from, and the widget keeps up with Textual's themes; drawing axes with the Line API
would be a plotting library of our own. It is handed values (`DatasetHistory`, a budget):
reading the file is the screen's worker's job. Plotext's output goes through
`Text.from_ansi`, so nothing from a file is drawn as text: the labels are the dataset's name
(checked at discovery) and our own words, cleaned all the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual_plotext import PlotextPlot

from gen_tui.backends.store.history_series import DatasetHistory, TimeAxis, count_ticks
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.format import format_count

COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "white")
"""One per dataset when all are drawn together (the ninth takes the first again)."""
LEGEND_COLORS = {"orange": "dark_orange"}
"""Plotext's names Rich spells otherwise (for the legend under the plots)."""
BUDGET_COLOR = "red"
MARKER = "braille"
"""Lines drawn in braille: 2x4 dots a cell, where plotext's default (quadrants, 2x2) at 80x24
leaves five rows of ten dots to a plot and a steady climb reads as a staircase."""


def legend(histories: Sequence[DatasetHistory], width: int) -> Text:
    """Which colour is which dataset when all are drawn together: "■ NAME TOKENS" per
    dataset, as many to a line as fit in `width`, so nine datasets take three lines at 80
    columns and leave the rows to the plots."""
    text = Text()
    used = 0
    for index, history in enumerate(histories):
        color = COLORS[index % len(COLORS)]
        last = history.points[-1].tokens if history.points else None
        entry = f"{one_line(history.dataset, 30)} {format_count(last) if last is not None else '-'}"
        if used and used + 3 + len(entry) > width:
            text.append("\n")
            used = 0
        elif used:
            text.append("  ")
            used += 2
        text.append("■ ", style=LEGEND_COLORS.get(color, color))
        text.append(entry)
        used += 2 + len(entry)
    return text


class HistoryPlots(Vertical):
    """Two plots, one above the other; `draw` replaces what both show."""

    DEFAULT_CSS = """
    HistoryPlots { height: 1fr; }
    HistoryPlots PlotextPlot { height: 1fr; min-height: 6; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.drawn: list[str] = []
        """What the last draw put on the plots, in words (names, figures): for the key line
        of the screen, and for tests, which cannot read braille."""

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="plot-tokens")
        yield PlotextPlot(id="plot-rate")

    def draw(self, histories: Sequence[DatasetHistory], budgets: Sequence[int | None]) -> None:
        """Plot each history's tokens (with its budget as a line when one dataset is shown,
        since the budgets of several do not share a scale) and tok/s, over a shared axis."""
        axis = TimeAxis.over(histories)
        tokens = self.query_one("#plot-tokens", PlotextPlot)
        rate = self.query_one("#plot-rate", PlotextPlot)
        drawn: list[str] = []
        for widget in (tokens, rate):
            widget.plt.clear_data()
            widget.plt.clear_figure()
        several = len(histories) > 1
        for index, history in enumerate(histories):
            if not history.points:
                continue
            color = COLORS[index % len(COLORS)]
            xs = [axis.x(p) for p in history.points]
            label = one_line(history.dataset, 40) if several else None
            tokens.plt.plot(
                xs, [p.tokens for p in history.points], color=color, label=label, marker=MARKER
            )
            rate.plt.plot(
                xs, [p.tok_s for p in history.points], color=color, label=label, marker=MARKER
            )
            drawn.append(f"{history.dataset} tokens {history.points[-1].tokens}")
        budget = budgets[0] if len(budgets) == 1 else None
        if budget and any(h.points for h in histories):
            tokens.plt.horizontal_line(budget, color=BUDGET_COLOR)
            drawn.append(f"budget {budget}")
        top = max([p.tokens for h in histories for p in h.points] + [budget or 0])
        fastest = max([p.tok_s for h in histories for p in h.points] + [0.0])
        ticks = {
            tokens: (top, count_ticks(top, budget)),
            rate: (fastest, count_ticks(fastest)),
        }
        # Labels of one width on both plots, so that their frames (and times) line up and
        # the upper plot can leave the shared time axis to the lower one: two more rows.
        width = max(len(label) for _, (_, labels) in ticks.values() for label in labels)
        for widget, (highest, (values, labels)) in ticks.items():
            if highest:  # from zero, and the budget line inside the frame even when far above
                widget.plt.ylim(0, highest * 1.05)
                widget.plt.yticks(values, [label.rjust(width) for label in labels])
        title = "tokens" + (" (red: the budget)" if budget else "")
        tokens.plt.title(title if drawn else "tokens: no points yet")
        rate.plt.title("tok/s")
        tokens.plt.xticks([])
        rate.plt.xlabel(axis.label())
        if axis.span:
            rate.plt.xticks(*axis.ticks())
        for widget in (tokens, rate):
            widget.refresh()
        self.drawn = drawn
