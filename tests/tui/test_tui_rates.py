"""A dataset that produces nothing shows 0 tok/s (issue 31 point 6): finished, or paused
with nothing in flight; its trailing window's rate used to decay for a minute on the panel,
the header, `h` (history.jsonl), progress.json, the headless table and the report."""

from __future__ import annotations

from collections.abc import Callable

from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.widgets.header import HeaderView
from tests.support.polling import wait_until
from tests.support.tui import SIZE, snap


def header(app: GenTuiApp) -> HeaderView:
    dashboard = app.dashboard
    assert dashboard is not None and dashboard.parts is not None
    return dashboard.parts.header.view


async def test_a_finished_dataset_reports_no_rate(app_factory: Callable[..., GenTuiApp]) -> None:
    app = app_factory(datasets={"A": (30, None), "B": (4000, None)}, tokens_per_s=20000)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(
            lambda: snap(app, "A") is not None and snap(app, "A").state.finished,
            60,
            "A runs out of prompts",
            pause=pilot.pause,
        )
        a = snap(app, "A")
        assert a is not None and a.state is DatasetState.EXHAUSTED and a.samples == 30
        assert a.tok_s == 0 and a.samples_s == 0, (a.tok_s, a.samples_s)
        assert a.eta_s is None


async def test_a_paused_run_reports_no_rate_once_drained(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    app = app_factory(datasets={"A": (4000, None)}, tokens_per_s=20000, mean=100)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(
            lambda: snap(app, "A") is not None and snap(app, "A").samples > 20, pause=pilot.pause
        )
        await pilot.press("p")
        await wait_until(
            lambda: snap(app, "A").state is DatasetState.PAUSED and snap(app, "A").inflight == 0,
            30,
            "A paused and drained",
            pause=pilot.pause,
        )
        await pilot.pause(0.6)  # a refresh of the header
        a = snap(app, "A")
        assert a is not None and a.tok_s == 0, a.tok_s
        assert header(app).tok_s == 0, header(app).tok_s
