"""The history plots at 80x24 draw a climb as a line, not a staircase: braille dots (2x4 a
cell, where plotext's default quadrants give 2x2), frames that line up so the two plots share
one time axis, labelled once under the lower plot (the upper gets those rows)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual_plotext import PlotextPlot

from gen_tui.backends.store.history import HistoryPoint
from gen_tui.backends.store.history_series import DatasetHistory
from gen_tui.widgets.history_plot import HistoryPlots
from tests.support.tui import SIZE

T0 = 1_700_000_000.0
BRAILLE = range(0x2801, 0x2900)
QUADRANTS = set("▖▗▘▙▚▛▜▝▞▟▄▀▌▐")


class PlotsApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HistoryPlots()


def climb(points: int = 10) -> DatasetHistory:
    """A steady climb to 300k tokens, a point every 5 s, as a run writes it."""
    return DatasetHistory(
        "B1",
        tuple(
            HistoryPoint(T0 + 5 * i, 1, "active", 30_000 * i, 50 * i, 6000.0 + 900 * (i % 3), 8, 0)
            for i in range(points + 1)
        ),
    )


def lines(app: PlotsApp, plot_id: str) -> list[str]:
    plot = app.query_one(f"#{plot_id}", PlotextPlot)
    return ["".join(s.text for s in plot.render_line(y)) for y in range(plot.size.height)]


async def test_a_climb_is_drawn_in_braille_on_one_shared_time_axis() -> None:
    app = PlotsApp()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(HistoryPlots).draw([climb()], [300_000])
        await pilot.pause()
        tokens, rate = lines(app, "plot-tokens"), lines(app, "plot-rate")
        for plot in (tokens, rate):
            dots = [c for line in plot for c in line if ord(c) in BRAILLE]
            assert len(dots) >= 40, "the curve is not drawn in braille"
            assert not QUADRANTS & set("".join(plot)), "quadrant blocks: the staircase"
        # The climb rises left to right through every row of the frame, bottom to budget.
        body = [line for line in tokens if "│" in line or "┤" in line]
        top_row: dict[int, int] = {}
        for row, line in enumerate(body):
            for column, c in enumerate(line):
                if ord(c) in BRAILLE:
                    top_row.setdefault(column, row)
        rows = [top_row[column] for column in sorted(top_row)]
        assert rows == sorted(rows, reverse=True), "the curve falls somewhere"
        assert set(rows) == set(range(len(body))), "a row of the frame has no dot"
        # One time axis: labelled under the lower plot only, both frames in the same columns.
        assert not any("since" in line for line in tokens)
        assert any("s since" in line for line in rate)
        frame = [
            next(line.index(c) for c in "┌" if c in line) for line in (tokens + rate) if "┌" in line
        ]
        assert len(frame) == 2 and frame[0] == frame[1], frame
