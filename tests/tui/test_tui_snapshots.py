"""Snapshot tests of the dashboard (pytest-textual-snapshot), fed a fixed set of snapshots.

No engine and no clock: eight DatasetSnapshots are built here with fixed values and shown
as 30 successive one-second snapshots (that fills the sparklines), with stale judged at a
fixed wall time. Update the SVGs with `pytest tests/tui/test_tui_snapshots.py --snapshot-update`
after a deliberate change, and look at them (the failure report shows both) before committing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.widgets.dataset_panel import DatasetPanel
from tests.support.static_source import StaticSnapshot

pytest.importorskip("pytest_textual_snapshot")

T0 = 1_700_000_000.0
STEPS = 30
# name, state, final tokens, token budget, samples, sample cap, tok/s, req/s, in flight,
# errors, mean length, seconds since its last record
ROWS: list[tuple[Any, ...]] = [
    ("B1_glaive", DatasetState.DONE, 1_503_211, 1_500_000, 2511, None, 0.0, 0.0, 0, 0, 598.6, 40),
    ("B2_opencodeinstruct", DatasetState.ACTIVE, 6_400_000, 10_000_000, 1688, 7000,
     161_000.0, 42.5, 24, 0, 3791.5, 0),
    ("B3_sharegpt", DatasetState.ACTIVE, 2_950_000, 6_000_000, 1970, None, 61_200.0, 40.8, 16,
     2, 1497.4, 0),
    ("B4_magicoder", DatasetState.PAUSED, 3_100_000, 8_000_000, 2818, None, 0.0, 0.0, 0, 0,
     1100.1, 12),
    ("B5_metamathqa", DatasetState.DRAINING, 3_990_000, 4_000_000, 5700, None, 28_000.0, 40.0,
     3, 0, 700.0, 0),
    ("B6_codefeedback", DatasetState.ACTIVE, 4_200_000, 12_000_000, 1750, None, 0.0, 0.0, 16, 0,
     2400.0, 300),
    ("B7_openhermes", DatasetState.WAITING, 0, 8_000_000, 0, None, 0.0, 0.0, 0, 0, None, None),
    ("B8_ultrachat", DatasetState.EXHAUSTED, 5_412_000, None, 3007, None, 0.0, 0.0, 0, 0,
     1799.8, 60),
]  # fmt: skip


def varied(index: int, step: int) -> float:
    """A share of a dataset's final rate at `step`: 0.7 to 1.0, different for each."""
    return 0.7 + 0.3 * ((step * 7 + index) % 5) / 4


def dataset(row: tuple[Any, ...], index: int, step: int) -> DatasetSnapshot:
    name, state, final, budget, samples, cap, tok_s, req_s, inflight, errors, mean, quiet = row
    # tokens written `STEPS - 1 - step` seconds before the end, with a varying per-second rate
    behind = sum(tok_s * varied(index, k) for k in range(step + 1, STEPS))
    tokens = int(final - behind)
    rate = tok_s * varied(index, step) if step < STEPS - 1 else tok_s  # the plot's points
    now = T0 + step
    eta = None
    if not state.finished and tok_s and budget is not None:
        eta = max(0.0, (budget - tokens) / tok_s)
    return DatasetSnapshot(
        name=name, state=state, tokens=tokens, samples=samples, max_tokens=budget,
        max_samples=cap, budget_mode="predictive", inflight=inflight, errors=errors,
        malformed=0, mean_tokens=mean, tok_s=rate, samples_s=req_s, eta_s=eta,
        resumed_tokens=0, resumed_samples=0, started_at=T0 - 100, updated_at=now,
        last_record_at=None if quiet is None else now - quiet, pid=4242, host="gpu-box",
    )  # fmt: skip


def run_snapshot(step: int) -> RunSnapshot:
    return RunSnapshot(
        datasets=tuple(dataset(row, i, step) for i, row in enumerate(ROWS)),
        concurrency=128,
        inflight=59,
        utilisation=0.87,
        elapsed_s=95.0 + step,
        active_s=90.0 + step,
        stopping=False,
        paused=False,
    )


def static_app(names: list[str]) -> GenTuiApp:
    """The dashboard fed by a `StaticSnapshot` instead of an engine."""
    return GenTuiApp(None, names=names, stale_after_s=20, sources=[StaticSnapshot(names, 20)])


def static_of(app: GenTuiApp) -> StaticSnapshot:
    return next(s for s in app.extra if isinstance(s, StaticSnapshot))


def show(app: GenTuiApp, snapshot: RunSnapshot, now: float) -> None:
    static_of(app).show(snapshot, now=now)
    assert app.dashboard is not None
    app.dashboard.refresh_view()


def dashboard() -> GenTuiApp:
    app = static_app([row[0] for row in ROWS])
    app.notice = "demo: budgets scaled to 60% to fit this machine (B2: 10M → 6M at 116k tok/s)"
    return app


async def feed(pilot: Any) -> None:
    app = pilot.app
    for _ in range(100):  # let the whole dashboard mount before the first snapshot arrives
        if app.dashboard is not None and app.dashboard.dashboard_up:
            break
        await pilot.pause(0.02)
    for step in range(STEPS):
        show(app, run_snapshot(step), now=T0 + step)
    app.record_event("info", "B2_opencodeinstruct: resuming with 1,200 records", "12:00:01")
    app.record_event("budget", "B1_glaive: budget reached: 1,503,211 tokens", "12:01:40")
    await pilot.pause()


@pytest.mark.quick
def test_dashboard_80x24(snap_compare: Any) -> None:
    assert snap_compare(dashboard(), terminal_size=(80, 24), run_before=feed)


def test_dashboard_160x48(snap_compare: Any) -> None:
    assert snap_compare(dashboard(), terminal_size=(160, 48), run_before=feed)


async def test_fixture_marks_the_quiet_dataset_stale() -> None:
    app = dashboard()
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot)
        views = {name: static_of(app).views[name] for name in app.dashboard.names}
        assert views["B6_codefeedback"].stale
        assert not views["B2_opencodeinstruct"].stale


async def test_arrow_keys_walk_the_grid_at_80x24() -> None:
    app = dashboard()
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot)
        selected = app.dashboard.selected()
        assert selected is not None and selected.dataset == "B1_glaive"
        walked = []
        for key in ("down", "down", "right", "down", "left", "down"):
            await pilot.press(key)
            selected = app.dashboard.selected()
            assert selected is not None
            walked.append(selected.dataset)
        assert walked == [
            "B3_sharegpt",
            "B5_metamathqa",
            "B6_codefeedback",
            "B8_ultrachat",
            "B7_openhermes",
            "B7_openhermes",
        ]


async def test_keys_that_arrive_together_each_move_the_selection() -> None:
    """A terminal hands over keys in bursts (a held arrow key, keys sent by tmux): two ↓ read
    in one go are handled before Textual's deferred focus lands, and the second used to move
    from the old panel, so one key was lost (B1, ↓↓ gave B3 in two columns, not B5)."""
    app = dashboard()
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot)
        app.dashboard.action_move(0, 1)  # two keys in one batch: no pause between them
        app.dashboard.action_move(0, 1)
        app.dashboard.action_move(1, 0)
        await pilot.pause()
        selected = app.dashboard.selected()
        assert selected is not None and selected.dataset == "B6_codefeedback"


async def test_down_reaches_a_ninth_panel_below_the_fold() -> None:
    app = static_app([row[0] for row in ROWS] + ["B9_stale"])
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot)
        for _ in range(4):
            await pilot.press("down")
        selected = app.dashboard.selected()
        assert selected is not None and selected.dataset == "B9_stale"
        # From the right column too: ↓ above the short last row lands on its panel (a new
        # user could not reach B9, the one panel saying "press k", from B8).
        await pilot.press("up", "right")
        selected = app.dashboard.selected()
        assert selected is not None and selected.dataset == "B8_ultrachat"
        await pilot.press("down")
        selected = app.dashboard.selected()
        assert selected is not None and selected.dataset == "B9_stale"
        await pilot.press("down")  # and stays there: there is no row below
        selected = app.dashboard.selected()
        assert selected is not None and selected.dataset == "B9_stale"


async def test_a_new_count_redraws_only_the_lines_it_changes() -> None:
    """A panel whose tokens move repaints its token bar, rate and details, not its title.

    Eight panels change four times a second: repainting whole panels is what cost a sixth
    of a core. The screen must still show the new values.
    """
    app = dashboard()
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot)
        panel = app.query_one("#" + panel_id("B3_sharegpt"), DatasetPanel)
        await pilot.pause()
        before = panel.lines()
        repainted: list[Any] = []
        original = panel.refresh

        def spy(*regions: Any, **kwargs: Any) -> Any:
            repainted.append(regions)
            return original(*regions, **kwargs)

        panel.refresh = spy  # type: ignore[method-assign]
        last = run_snapshot(STEPS - 1)
        moved = tuple(
            dataclasses.replace(s, tokens=5_000_000, tok_s=99_000.0)
            if s.name == "B3_sharegpt"
            else s
            for s in last.datasets
        )
        show(app, dataclasses.replace(last, datasets=moved), now=T0 + STEPS - 1)
        await pilot.pause()
        after = panel.lines()
        changed = {y for y, (old, new) in enumerate(zip(before, after, strict=True)) if old != new}
        assert changed and 0 not in changed  # the title and badge did not move
        assert repainted and all(regions for regions in repainted)  # never the whole panel
        rows = sorted(region.y for regions in repainted for region in regions)
        assert set(rows) == changed and all(r.height == 1 for g in repainted for r in g)
        text = "".join(segment.text for segment in panel.render_line(1))
        assert "5M / 6M" in text
        assert "99k tok/s" in "".join(segment.text for segment in panel.render_line(3))
