"""Quitting while a run this session started elsewhere drains: the screen says so."""

from __future__ import annotations

from pathlib import Path

from gen_tui.app.launch import demo_app
from gen_tui.widgets.header import HeaderView
from tests.support.polling import wait_until
from tests.support.runs import alive
from tests.support.tui import SIZE


async def test_q_says_what_it_drains_while_the_runs_it_started_stop(tmp_path: Path) -> None:
    app = demo_app(tmp_path, autostart=False)  # no run here: only the demo's stale run
    async with app.run_test(size=SIZE) as pilot:
        link = app.links[0]
        await wait_until(lambda: link.started, 60, "the stale run started", pause=pilot.pause)
        pid = link.started[0].pid

        def in_flight() -> int:
            monitor = link.monitor
            snap = monitor.snapshot("B9_stale", 0.0) if monitor is not None else None
            return snap.inflight if snap is not None else 0

        before = in_flight()
        await pilot.press("q")
        await pilot.pause()
        dashboard = app.dashboard
        assert dashboard is not None
        assert dashboard.notice.startswith(
            "quitting: stopping the runs this session started, draining "
        ), dashboard.notice
        said = int(dashboard.notice.split("draining ")[1].split(" answer")[0])
        assert said in (before, in_flight()), "it says the answers in flight"
        parts = dashboard.parts
        assert parts is not None

        def header() -> HeaderView:
            return parts.header.view

        await wait_until(lambda: header().state == "quitting", 5, pause=pilot.pause)
        assert app.is_running, "the app stays up, saying so, while the run stops"
        await wait_until(lambda: not app.is_running, 60, "the app to exit", pause=pilot.pause)
    assert link.done.is_set() and not alive(pid)
