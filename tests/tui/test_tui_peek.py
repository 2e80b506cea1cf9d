"""The closer looks at one dataset (d quality, v answers, L log), --readonly, and what a new
user met at 80x24: panels that did not fit, → wrapping rows, a paused panel's rate, a wide
panel's narrow chart."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import Static

from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.dialogs.peek import LogScreen, QualityScreen, SampleScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.quality import QualityWatch
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.telemetry.gpus import Gpu
from gen_tui.widgets.dataset_panel import LEFT_WIDTH, DatasetPanel, PanelView
from gen_tui.widgets.key_line import shown_keys
from tests.support.panel_snapshots import T0, run_of, shown, snapshot, static_app
from tests.support.polling import wait_until
from tests.support.records import read_records
from tests.support.tui import SIZE, panel

pytest.importorskip("pytest_textual_snapshot")


def body(app: GenTuiApp) -> str:
    rendered = app.screen.query_one("#peek-body", Static).render()
    return rendered.plain if isinstance(rendered, Text) else str(rendered)


async def test_d_shows_the_selected_datasets_quality_and_fits_80x24() -> None:
    app, static = static_app(["A", "B"])
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A"), snapshot("B", quality=None)))
        await pilot.press("d")
        screen = await wait_until(lambda: isinstance(app.screen, QualityScreen) and app.screen,
                                  pause=pilot.pause)  # fmt: skip
        text = body(app)
        assert "A · data quality" in str(screen.query_one("#peek-title").render())
        assert "stop 70 (70%)" in text and "length 30 (30%)" in text
        assert "over the 5% warning" in text, "30% cut passes the 5% warning"
        assert "p50 " in text and "p99 " in text
        assert "7 × HTTP 500: upstream exploded" in text and "1 × timeout" in text
        # 1,500k tokens to go; 600 prompts x 500 = 300k: the file runs out at ~800k
        assert "runs out of prompts at ~800k of its 2M budget (600 left)" in text
        assert len(text.splitlines()) <= SIZE[1] - 2, "the view fits 80x24 with title and keys"
        # live: a new snapshot shows at once
        static.show(run_of(snapshot("A", errors=9, quality=QualityWatch().published())), T0)
        await wait_until(lambda: "0 answers this run" in body(app), 5, pause=pilot.pause)
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.dashboard, pause=pilot.pause)
        await pilot.press("right", "d")
        await wait_until(lambda: isinstance(app.screen, QualityScreen), pause=pilot.pause)
        assert "does not publish them" in body(app), "B's writer published no figures"


async def test_v_shows_the_last_answers_read_from_the_record_file(
    app_factory: Callable[..., GenTuiApp], tmp_path: Any
) -> None:
    app = app_factory(datasets={"A": (30, None)}, mean=40)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: app.runs and not app.runs[0].active, 60, pause=pilot.pause)
        records = read_records(tmp_path / "out" / "A")
        await pilot.press("v")
        await wait_until(lambda: isinstance(app.screen, SampleScreen), pause=pilot.pause)
        screen = app.screen
        assert isinstance(screen, SampleScreen)
        await wait_until(lambda: screen.samples, 30, "the answers read", pause=pilot.pause)
        assert len(screen.samples) == min(20, len(records))
        newest = records[-1]
        assert screen.samples[0].sample_id == str(newest["sample_id"])
        text = body(app)
        assert f"#{newest['sample_id']} · {newest['finish_reason']}" in text
        assert newest["text"].strip()[:60] in text
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.dashboard, pause=pilot.pause)
        await pilot.press("L")
        await wait_until(lambda: isinstance(app.screen, LogScreen), pause=pilot.pause)
        await wait_until(lambda: "summary:" in body(app), 10, pause=pilot.pause)
        assert "this process's events" in str(app.screen.query_one("#peek-title").render())


async def test_readonly_turns_off_the_keys_that_change_a_run() -> None:
    app, static = static_app(["A"], readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A")))
        header = app.dashboard.parts.header  # type: ignore[union-attr]
        assert "READ-ONLY" in header.render().plain
        # Shown dimmed, as the docs say (issue 31.14: they were hidden).
        keys = {key: enabled for key, _, _, _, enabled, _ in shown_keys(app.dashboard)}
        assert {key: keys.get(key) for key in "krsp"} == dict.fromkeys("krsp", False)
        for key in ("k", "r", "s", "p"):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is app.dashboard, f"{key} opened {app.screen}"
            assert not app._notifications, f"{key} said something: it should be off"
        await pilot.press("d")
        await wait_until(lambda: isinstance(app.screen, QualityScreen), pause=pilot.pause)


async def test_a_control_key_still_works_without_readonly() -> None:
    app, static = static_app(["A"])
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A")))
        assert "READ-ONLY" not in app.dashboard.parts.header.render().plain  # type: ignore[union-attr]
        await pilot.press("k")
        await wait_until(
            lambda: isinstance(app.screen, ConfirmScreen) or app._notifications, pause=pilot.pause
        )


async def test_nine_panels_fit_80x24_and_right_stays_in_its_row() -> None:
    names = [f"B{i}" for i in range(1, 10)]
    app, static = static_app(names)
    app.notice = "a notice line"
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        footer_y = SIZE[1] - 1
        for name in names:
            region = panel(app, name).region
            assert region.height >= 4 and region.bottom <= footer_y, (name, region)
        stale = panel(app, "B9")
        assert "in flight" in "".join(t for t, _ in stale.lines()[-1]), "B9 shows its details"
        await pilot.press("right")
        assert app.dashboard.selected().dataset == "B2"  # type: ignore[union-attr]
        await pilot.press("right")
        assert app.dashboard.selected().dataset == "B2", "→ in the right column stays"  # type: ignore[union-attr]


async def test_nine_panels_fit_80x24_under_the_server_and_gpu_lines() -> None:
    """Issue 31.14: with the demo's server and GPU lines and its notice, nine panels pushed
    B9's last line off-screen behind a scrollbar (the layout counted the header and the
    notice, not the strips). The panels shrink to three lines instead: all whole, no
    scroll."""
    names = [f"B{i}" for i in range(1, 10)]
    app, static = static_app(names)
    app.notice = "a notice line"
    gpus = tuple((Gpu(i, "H100", 50.0, 1000.0, 80_000.0), (0.5,)) for i in range(8))
    run = dataclasses.replace(
        run_of(*(snapshot(n) for n in names)), servers={"http://gpu:30000": "down"}, gpus=gpus
    )
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run)
        parts = app.dashboard.parts  # type: ignore[union-attr]
        await wait_until(lambda: parts.servers.display and parts.gpus.display, pause=pilot.pause)
        await pilot.pause()
        footer_y = SIZE[1] - 1
        for name in names:
            region = panel(app, name).region
            assert region.height == 3 and region.bottom <= footer_y, (name, region)
        assert parts.board.max_scroll_y == 0, "the board does not scroll"
        assert "tok/s" in "".join(t for t, _ in panel(app, "B9").lines()[-1])


def line_text(line: Any) -> str:
    return "".join(text for text, _ in line)


async def test_a_wide_panel_gives_its_chart_the_room_beside_the_figures() -> None:
    app, static = static_app(["A"])
    async with app.run_test(size=(160, 30)) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A")))
        widget = panel(app, "A")
        width = widget.size.width
        assert width > 150
        lines = widget.lines()
        bar = line_text(lines[1])
        assert bar.rstrip().endswith("500k / 2M")
        assert bar.index("500k / 2M") < LEFT_WIDTH, "the bar keeps to the figures' columns"
        charted = [line[-1] for line in lines[1:] if line and line[-1][1] == ("spark",)]
        assert len(charted) == widget.size.height - 3, "the chart fills the rows between"
        assert all(len(text) >= width - LEFT_WIDTH - 2 for text, _ in charted)
        assert "gpu-box:4242" in line_text(lines[-1]), "the details keep the whole width"


def test_a_paused_panel_shows_no_rate_and_no_eta() -> None:
    widget = DatasetPanel("A")
    paused = snapshot("A", state=DatasetState.PAUSED, prompts_left=None)
    widget.view = PanelView(paused)
    text = " ".join(line_text(line) for line in widget._lines_at(40, 5, chart=True))
    assert "paused: nothing sent" in text
    assert "ETA" not in text and "tok/s" not in text


def test_a_panel_says_when_its_prompts_run_out_before_its_budget() -> None:
    widget = DatasetPanel("A")
    widget.view = PanelView(snapshot("A"))
    text = " ".join(line_text(line) for line in widget._lines_at(60, 9, chart=True))
    assert "prompts run out ~800k" in text
    # issue 31, point 19: no ETA toward a budget the prompts cannot reach
    assert "ETA" not in text and "prompts run out ~800k in 15s" in text, text  # 300k at 20k/s
    widget.view = PanelView(snapshot("A", prompts_left=10_000))
    text = " ".join(line_text(line) for line in widget._lines_at(60, 9, chart=True))
    assert "run out" not in text


def test_quality_view_80x24_snapshot(snap_compare: Any) -> None:
    app, static = static_app(["B2_opencodeinstruct"])

    async def open_quality(pilot: Any) -> None:
        await shown(pilot, app, static, run_of(snapshot("B2_opencodeinstruct")))
        await pilot.press("d")
        await wait_until(lambda: isinstance(app.screen, QualityScreen), pause=pilot.pause)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_quality)


async def test_the_selected_panel_has_its_whole_title_in_the_focus_colour() -> None:
    long = "B2_opencodeinstruct_with_a_long_name"
    app, static = static_app([long, "B"])
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(snapshot(long), snapshot("B")))
        selected, other = panel(app, long), panel(app, "B")
        assert selected.has_focus
        focus_bg = selected.get_component_rich_style("panel--title-focus").bgcolor
        name_cells = [seg for seg in selected.render_line(0) if long[:10] in seg.text]
        assert name_cells and all(seg.style.bgcolor == focus_bg for seg in name_cells)
        assert all(seg.style.bgcolor != focus_bg for seg in other.render_line(0))
