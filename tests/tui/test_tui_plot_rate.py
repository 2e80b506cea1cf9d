"""A panel's plot follows the rate its line shows: the demo's B9 (one slot at 50 tok/s, a
~4000-token record every ~80 s) peaked near 750 tok/s, a record's tokens over the second or
few between two snapshots (issue 31, tried as a new user)."""

from __future__ import annotations

from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.widgets.dataset_panel import HISTORY_POINTS
from tests.support.panel_snapshots import T0, run_of, shown, snapshot, static_app
from tests.support.tui import SIZE, panel


async def test_a_slow_writers_plot_stays_at_its_steady_rate() -> None:
    app, static = static_app(["B9_stale"])
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(snapshot("B9_stale", tokens=0, tok_s=50.0)))
        assert app.dashboard is not None
        for second in range(1, 300):
            tokens = 4000 * (second // 80)  # a record lands every 80 s
            seen = snapshot("B9_stale", tokens=tokens, tok_s=50.0, updated_at=T0 + second)
            static.show(run_of(seen), now=T0 + second)
            app.dashboard.refresh_view()
        await pilot.pause()
        plotted = panel(app, "B9_stale").history
        assert len(plotted) == HISTORY_POINTS, len(plotted)  # a point a second
        assert max(plotted) <= 50.0, max(plotted)
        assert min(plotted) >= 50.0, min(plotted)  # steady: no 0 between records either


async def test_a_paused_datasets_plot_falls_to_zero_as_its_line_says() -> None:
    app, static = static_app(["A"])
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A")))
        assert app.dashboard is not None
        for second in range(1, 5):
            paused = snapshot("A", state=DatasetState.PAUSED, updated_at=T0 + second)
            static.show(run_of(paused), now=T0 + second)
            app.dashboard.refresh_view()
        await pilot.pause()
        assert panel(app, "A").history[-4:] == (0.0,) * 4
