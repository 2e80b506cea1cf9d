"""The event log says `info:` for information, as `gen-tui run` does (issue 31, defect 18):
a host link's notice (Textual's severity "information") showed as `information:` beside
the engine's `info:` lines."""

from __future__ import annotations

from textual.widgets import RichLog

from gen_tui.app.tui import GenTuiApp
from tests.support.polling import wait_until
from tests.support.static_source import StaticSnapshot
from tests.support.tui import log_text


async def test_information_is_said_info_in_the_event_log() -> None:
    app = GenTuiApp(None, names=["A"], stale_after_s=20, sources=[StaticSnapshot(["A"], 20)])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.record_event("information", "gpu: resumed to 12M as pid 4242")
        app.record_event("info", "A: resuming with 1,200 records")
        assert app.dashboard is not None
        events = app.dashboard.query_one("#events", RichLog)
        await wait_until(lambda: "pid 4242" in log_text(events))
        said = log_text(events)
        assert "information:" not in said, said
        assert "info: gpu: resumed to 12M" in said, said
        assert [level for level, _ in app.events[-2:]] == ["info", "info"]
