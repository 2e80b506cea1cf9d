"""`h`: a dataset's history as plots (tokens with the budget line, tok/s), for a run of this
process and for a finished run watched through a host link (the watcher's bounded tail)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from textual.widgets import Label
from textual_plotext import PlotextPlot

from gen_tui.app.dialogs.history import HistoryScreen
from gen_tui.app.dialogs.modals import HelpScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.figures import format_count
from gen_tui.backends.store.history import HistoryPoint
from gen_tui.backends.store.tails import HISTORY_TAIL_LINES
from gen_tui.widgets.history_plot import HistoryPlots
from tests.support.polling import wait_until
from tests.support.records import read_records
from tests.support.run_output import copy_run
from tests.support.tui import SIZE, snap


def summary(app: GenTuiApp) -> str:
    return str(app.screen.query_one("#history-summary", Label).render())


def title(app: GenTuiApp) -> str:
    return str(app.screen.query_one("#history-title", Label).render())


def plot_text(app: GenTuiApp, plot_id: str) -> str:
    plot = app.screen.query_one(f"#{plot_id}", PlotextPlot)
    return "\n".join("".join(s.text for s in plot.render_line(y)) for y in range(plot.size.height))


def history_lines(folder: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (folder / "history.jsonl").read_bytes().splitlines()]


async def open_history(app: GenTuiApp, pilot: Any) -> HistoryScreen:
    await pilot.press("h")
    screen = await wait_until(
        lambda: isinstance(app.screen, HistoryScreen) and app.screen, pause=pilot.pause
    )
    await wait_until(lambda: screen.histories, 20, "the history read", pause=pilot.pause)
    return screen


async def test_h_plots_a_finished_runs_tokens_against_its_budget_and_switches_dataset(
    app_factory: Callable[..., GenTuiApp], tmp_path: Path
) -> None:
    app = app_factory(datasets={"A": (400, 3000), "B": (400, 2000)}, mean=40, tokens_per_s=4000)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: app.runs and not app.runs[0].active, 60, pause=pilot.pause)
        out = tmp_path / "out"
        screen = await open_history(app, pilot)
        last = history_lines(out / "A")[-1]
        assert last["state"] == "done"
        assert last["tokens"] == sum(r["completion_tokens"] for r in read_records(out / "A"))
        text = summary(app)
        assert text.startswith(f"A: {format_count(last['tokens'])} tokens of 3k budget"), text
        assert "· done" in text and "1 run ·" in text
        shown = app.screen.query_one("#history-summary", Label)
        assert len(text) > 80 and shown.size.height >= 2, "at 80 columns it wraps, not cut"
        drawn = screen.query_one(HistoryPlots).drawn
        assert drawn == [f"A tokens {last['tokens']}", "budget 3000"]
        tokens_plot = plot_text(app, "plot-tokens")
        assert "tokens (red: the budget)" in tokens_plot
        assert "budget 3k" in tokens_plot, "the budget line is named on its axis"
        assert "tok/s" in plot_text(app, "plot-rate")

        await pilot.press("right")
        await wait_until(lambda: summary(app).startswith("B: "), 10, pause=pilot.pause)
        assert title(app).startswith("B · history")
        b_last = history_lines(out / "B")[-1]
        assert summary(app).startswith(f"B: {format_count(b_last['tokens'])} tokens of 2k budget")

        await pilot.press("a")
        await wait_until(lambda: len(screen.histories) == 2, 10, pause=pilot.pause)
        assert title(app).startswith("every dataset")
        assert [h.dataset for h in screen.histories] == ["A", "B"]
        assert "budget" not in " ".join(screen.query_one(HistoryPlots).drawn), (
            "two budgets share no scale: no budget line"
        )
        # Under the plots, a legend: which colour is which dataset, each with its tokens.
        shown = summary(app)
        assert "■ A " in shown and "■ B " in shown, shown
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.dashboard, pause=pilot.pause)


async def test_h_reads_a_watched_runs_history_through_the_host_bounded(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out = copy_run(finished_run, tmp_path)
    real = history_lines(out / "A")
    # A long night before this run: more points than one fetch brings, so they are spread
    # over it, from the night's first point to this run's last.
    start = real[0]["t"] - 3 * 3600
    night = [
        HistoryPoint(start + 5 * i, 77, "running", 10 * i, i, 50.0, 4, 0).to_line()
        for i in range(HISTORY_TAIL_LINES + 500)
    ]
    history = out / "A" / "history.jsonl"
    history.write_bytes(b"".join(night) + history.read_bytes())
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: app.dashboard is not None and app.dashboard.names, 20,
                         pause=pilot.pause)  # fmt: skip
        # A's panel figures (its budget, which `h` shows) come from the host's survey, which
        # may land after the names: wait for them, as a person would see the panel first (a
        # race CI lost once, the history opened before the panel had its figures)
        await wait_until(lambda: snap(app, "A"), 20, "A's panel", pause=pilot.pause)
        screen = await open_history(app, pilot)
        (shown,) = screen.histories
        assert shown.dataset == "A"
        assert len(shown.points) == HISTORY_TAIL_LINES, "one fetch is bounded"
        assert shown.points[0].t == start, "the night's first point is drawn"
        assert shown.points[-1].tokens == real[-1]["tokens"], "the newest point is drawn"
        text = summary(app)
        panel_snap = snap(app, "A")
        assert panel_snap is not None
        budget = panel_snap.max_tokens
        said = f" of {format_count(budget)} budget" if budget else " (no token budget)"
        assert text.startswith(f"A: {format_count(real[-1]['tokens'])} tokens{said}"), text
        total = len(night) + len(real)
        assert f"{HISTORY_TAIL_LINES:,} of {total:,} points" in text and "2 runs" in text
        assert "older points not fetched" not in text
        await pilot.press("right")
        await wait_until(lambda: summary(app).startswith("B: "), 10, pause=pilot.pause)
        assert "older points" not in summary(app)


async def test_h_is_in_help_and_says_when_no_history_is_known_for_a_dataset() -> None:
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        help_screen = await wait_until(
            lambda: isinstance(app.screen, HelpScreen) and app.screen, pause=pilot.pause
        )
        assert {row.key: row.description for row in help_screen.rows}["h"] == "History"
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.dashboard, pause=pilot.pause)
        await open_history(app, pilot)
        assert summary(app) == "A: no history to show: no output folder known for it here"
        assert "tokens: no points yet" in plot_text(app, "plot-tokens")
