"""Issue 31 (panel): at 120 columns the header dropped the servers' figures, `(server: 57
run, 0 queued, 96 in transit)`, beside the demo's "budgets 35%: slow machine": a part that
did not fit was skipped whole, whatever its worth, while the pid after it stayed. The
header now gives way least important first (the pid, then the servers' words shortened,
then the note cut), so the servers' figures stay beside the in-flight count.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from gen_tui.app import demo_tui
from gen_tui.widgets.header import HeaderView, RunHeader
from tests.support.polling import wait_until
from tests.support.tui import demo_up

WIDE = (120, 36)

DEMO_LIKE = HeaderView(
    state="running", tokens=1_234_000, tok_s=3400, done=0, total=8, inflight=153,
    concurrency=160, utilisation=0.95, server_running=57, server_queued=0,
    note="budgets 35%: slow machine", where="pid 4242 on here",
    hosts=(("here", "connected"),),
)  # fmt: skip


class HeaderApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")


async def test_at_120_columns_the_servers_figures_stay_beside_the_in_flight_count() -> None:
    app = HeaderApp()
    async with app.run_test(size=WIDE) as pilot:
        header = app.query_one(RunHeader)
        header.view = DEMO_LIKE
        await pilot.pause()
        line = str(header.render())
        assert "in flight 153/160" in line, line
        assert "(srv 57 run · 0 q · 96 transit)" in line, line
        assert "budgets 35%" in line, line  # cut, still said
        assert "pid 4242" not in line, line  # the least important went first
        assert len(line) <= WIDE[0], line

        header.view = HeaderView(**{**DEMO_LIKE.__dict__, "note": ""})
        await pilot.pause()
        line = str(header.render())  # room enough: the servers' words in full
        assert "(server: 57 run, 0 queued, 96 in transit)" in line, line

        header.view = HeaderView(**{**DEMO_LIKE.__dict__, "tokens": 10**15})
        await pilot.pause()
        line = str(header.render())
        assert "in flight 153/160" in line and "budgets 35%" in line, line


async def test_the_demo_header_at_120_columns_keeps_its_note_and_the_servers_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo on a machine "too slow" for a 3 s target (it scales its budgets and says so
    in the header), once its servers' /metrics are known."""
    monkeypatch.setattr(demo_tui, "TARGET_S", 3.0)
    monkeypatch.setattr(demo_tui, "WARMUP_S", 2.0)
    monkeypatch.setattr(demo_tui, "CALIBRATION_WINDOW_S", 3.0)
    monkeypatch.setattr(demo_tui, "SETTLE_S", 120.0)
    async with demo_up(tmp_path, size=WIDE) as demo:
        header = demo.parts.header

        def ready() -> bool:
            view = header.view
            return bool(view.note) and view.concurrency > 0 and view.server_running is not None

        await wait_until(
            ready, 120, "the note, the pool and the servers' figures", pause=demo.pilot.pause,
            detail=lambda: header.view,
        )  # fmt: skip
        line = str(header.render())
        assert "budgets" in line, line
        assert "in flight " in line, line
        assert "(srv " in line or "(server: " in line, line
