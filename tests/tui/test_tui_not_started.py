"""A dataset no run has touched yet reads "not started", not "stopped" (which reads as if
something had been killed); one a run has left records of, and nothing writes now, still
reads "stopped"; both can be started with `r`."""

from __future__ import annotations

from pathlib import Path

from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.dialogs.modals import ResumeScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetState
from tests.support.polling import wait_until
from tests.support.runs import append_records
from tests.support.tui import SIZE, badge, panel, snap


async def test_an_untouched_dataset_reads_not_started_and_a_left_one_stopped(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    await append_records(out / "B1", 3, "b1-")  # a run wrote these, and is gone
    source = host_source("local", str(out), datasets=["B1", "B2"])
    app = GenTuiApp(None, hosts=[source])
    async with app.run_test(size=SIZE) as pilot:
        for name in ("B1", "B2"):
            await wait_until(lambda n=name: app.query(f"#{panel_id(n)}"), 30, pause=pilot.pause)
            await wait_until(lambda n=name: snap(app, n) is not None, 30, pause=pilot.pause)
        await wait_until(lambda: snap(app, "B1").samples == 3, 30, pause=pilot.pause)
        assert snap(app, "B2").state is DatasetState.NOT_STARTED
        assert badge(app, "B2") == "not started"
        assert badge(app, "B1") == "stopped"
        assert "not started" in "".join(s.text for s in panel(app, "B2").render_line(0))
        # It is at rest: no rate claimed, no ETA, not counted as done in the header.
        assert snap(app, "B2").eta_s is None
        assert app.dashboard.query_one("#header").view.done == 0

        # r offers to start it, as it does for a stopped one.
        panel(app, "B2").focus()
        await pilot.press("r")
        modal = await wait_until(
            lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
        )
        assert modal.target.name == "B2" and modal.target.tokens == 0
