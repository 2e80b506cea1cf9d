"""Quitting: with no run it exits at once; a run of this process is asked about and drained;
a run this session started elsewhere drains with the screen saying so."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gen_tui.app.cli.launch import demo_app
from gen_tui.app.demo_tui import STALE
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.widgets.header import HeaderView
from tests.support.polling import wait_until
from tests.support.runs import alive
from tests.support.tui import SIZE, in_flight, snap, started_stale_run


async def test_q_says_what_it_drains_while_the_runs_it_started_stop(tmp_path: Path) -> None:
    app = demo_app(tmp_path, autostart=False)  # no run here: only the demo's stale run
    async with app.run_test(size=SIZE) as pilot:
        link, pid = await started_stale_run(app, pilot)

        before = in_flight(link, STALE)
        await pilot.press("d")  # q from a view over the panels comes back to them
        await wait_until(lambda: app.screen is not app.dashboard, 5, pause=pilot.pause)
        await pilot.press("q")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), 5, pause=pilot.pause)
        await pilot.press("y")
        await wait_until(lambda: app.screen is app.dashboard, 5, pause=pilot.pause)
        await pilot.pause()
        dashboard = app.dashboard
        assert dashboard is not None
        assert dashboard.notice.startswith("quitting: runs started here drain "), dashboard.notice
        assert " s left · q: leave now" in dashboard.notice, "for how long, and the way out"
        assert len(dashboard.notice) <= SIZE[0] - 2, "the whole line at 80 columns"
        said = int(dashboard.notice.split("drain ")[1].split(" answer")[0].replace(",", ""))
        assert said in (before, in_flight(link, STALE)), "it says the answers in flight"
        parts = dashboard.parts
        assert parts is not None

        def header() -> HeaderView:
            return parts.header.view

        await wait_until(lambda: header().state == "quitting", 5, pause=pilot.pause)
        assert app.is_running, "the app stays up, saying so, while the run stops"
        await wait_until(lambda: not app.is_running, 60, "the app to exit", pause=pilot.pause)
    assert link.done.is_set() and not alive(pid)


@pytest.mark.quick
async def test_quit_asks_while_a_run_is_active_and_drains_it(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    app = app_factory(datasets={"A": (400, 10**9)}, tokens_per_s=500, max_new_tokens=500)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: snap(app, "A") and snap(app, "A").inflight > 0, pause=pilot.pause)
        await pilot.press("q")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        await pilot.press("n")
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        assert app.is_running and app.runs[0].active
        await pilot.press("q", "y")
        await wait_until(lambda: app.return_code is not None, pause=pilot.pause)
    assert app.return_code == 0, "a drained quit is a clean exit"
    assert not app.runs[0].active
    assert app.runs[0].outcome == "stopped"


async def test_quit_without_a_run_exits_at_once() -> None:
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await wait_until(lambda: app.return_code is not None, pause=pilot.pause)
    assert app.return_code == 0


async def test_ctrl_c_quits_as_q_does() -> None:
    """Issue 31 point 9: ctrl+c said `Press [b]ctrl+q[/b] to quit` with the tags shown."""
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        await wait_until(lambda: app.return_code is not None, 5, pause=pilot.pause)
    assert app.return_code == 0


async def test_yes_after_the_run_ended_under_the_dialog_exits(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    """Issue 31 point 3: a run that ends while "Quit gen-tui?" is open has sent its end
    already; `y` used to wait for it, the header at QUITTING for good."""
    app = app_factory(datasets={"A": (60, None)}, tokens_per_s=3000, mean=200)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: snap(app, "A") and snap(app, "A").inflight > 0, pause=pilot.pause)
        await pilot.press("q")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        body = str(app.screen.query_one("#confirm-body").render())
        # The verb agrees with the count: "1 answer in flight drains", "5 answers ... drain".
        agrees = r"(\b1 answer in flight drains|answers in flight drain) for up"
        assert re.search(agrees, body), body
        await wait_until(lambda: not app.runs[0].active, 60, "the run ends", pause=pilot.pause)
        await pilot.press("y")
        await wait_until(lambda: app.return_code is not None, 5, "the exit", pause=pilot.pause)
    assert app.return_code == 0


async def test_q_again_while_the_runs_started_here_drain_leaves_in_seconds(
    tmp_path: Path,
) -> None:
    """Issue 31 point 3: `q` again while the demo's stale run drained left a blank terminal
    for ~27 s (the exit waited for the drain anyway); now it ends the run at once and the
    app is gone within seconds."""
    app = demo_app(tmp_path, autostart=False)  # no run here: only the demo's stale run
    async with app.run_test(size=SIZE) as pilot:
        link, pid = await started_stale_run(app, pilot)

        # answers that never finish: the drain takes the run's whole grace
        await wait_until(
            lambda: in_flight(link, STALE) > 0, 60, "answers in flight", pause=pilot.pause
        )
        await pilot.press("q")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), 5, pause=pilot.pause)
        await pilot.press("y")
        dashboard = app.dashboard
        assert dashboard is not None
        await wait_until(
            lambda: dashboard.notice.startswith("quitting:"), 5, "the notice", pause=pilot.pause
        )
        await pilot.pause(0.5)
        left = int(dashboard.notice.split(" s left")[0].rsplit(" ", 1)[1])
        assert left >= 10, f"the stale run's drain is long: {dashboard.notice}"
        begun = time.monotonic()
        await pilot.press("q")
        await wait_until(
            lambda: "now" in dashboard.notice or not app.is_running, 5, pause=pilot.pause
        )
        await wait_until(lambda: not app.is_running, 15, "the app to exit", pause=pilot.pause)
    assert time.monotonic() - begun < 12, "q again leaves within seconds"
    assert link.done.is_set() and not alive(pid)


async def test_q_with_only_a_run_started_here_active_asks_first(tmp_path: Path) -> None:
    """Issue 31 point 3: plain `q` with only the demo's stale B9 active asked nothing and
    took ~33 s. The run is active: `q` asks, naming it and its drain; `n` leaves it running."""
    app = demo_app(tmp_path, autostart=False)  # no run here: only the demo's stale run
    async with app.run_test(size=SIZE) as pilot:
        link, pid = await started_stale_run(app, pilot)
        await pilot.press("q")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), 5, pause=pilot.pause)
        body = str(app.screen.query_one("#confirm-body").render())
        assert "B9_stale" in body and "drain for up to" in body, body
        await pilot.press("n")
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen), 5, pause=pilot.pause)
        await pilot.pause(0.5)
        assert app.is_running and alive(pid) and not link.done.is_set()
        dashboard = app.dashboard
        assert dashboard is not None and not dashboard.notice.startswith("quitting")
        await pilot.press("q")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), 5, pause=pilot.pause)
        await pilot.press("y")
        await wait_until(
            lambda: dashboard.notice.startswith("quitting:"), 5, "the line", pause=pilot.pause
        )
        await pilot.press("q")  # and q again ends it at once
        await wait_until(lambda: not app.is_running, 20, "the app to exit", pause=pilot.pause)
    assert link.done.is_set() and not alive(pid)


async def test_q_after_the_run_started_here_ended_asks_nothing(tmp_path: Path) -> None:
    """Seen in tmux at 80x24 and 120x36 (issue 31, tried again): `k` then `y` on the demo's
    stale B9; it drained, exited, and `l` listed it as ended. Then `q` (or ctrl+c) still
    asked "A run started here is active: B9_stale. Quitting stops it first: its 0 answers
    in flight drain for up to 35 s". Nothing is active any more: `q` leaves at once."""
    app = demo_app(tmp_path, autostart=False)  # no run here: only the demo's stale run
    async with app.run_test(size=SIZE) as pilot:
        link, pid = await started_stale_run(app, pilot)
        await wait_until(lambda: link.monitor is not None, 30, pause=pilot.pause)
        monitor = link.monitor
        assert monitor is not None
        await wait_until(
            lambda: any(run.identity.pid == pid for run in monitor.runs),
            60,
            "the monitor lists the stale run",
            pause=pilot.pause,
        )
        os.killpg(pid, signal.SIGKILL)  # it ends, as after `k`: the monitor sees it gone
        await wait_until(
            lambda: any(run.identity.pid == pid for run in monitor.ended),
            60,
            "the monitor lists it as ended",
            pause=pilot.pause,
        )
        await pilot.press("q")
        await wait_until(
            lambda: not app.is_running or isinstance(app.screen, ConfirmScreen),
            20,
            "the exit, or a question",
            pause=pilot.pause,
        )
        asked = isinstance(app.screen, ConfirmScreen) and app.is_running
        body = str(app.screen.query_one("#confirm-body").render()) if asked else ""
        assert not asked, f"q asked about a run that ended: {body}"
    assert not alive(pid)
