"""The line left in the terminal once the panel has gone: what the session wrote and where
(issue 31, request 9)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gen_tui.app.cli.launch import _finish, demo_app
from gen_tui.app.exit_summary import TEMPORARY
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.demo import STAR
from tests.support.polling import wait_until
from tests.support.records import read_records
from tests.support.tui import SIZE, end_started_runs, snap


async def test_leaving_prints_what_the_session_wrote_and_where(
    app_factory: Callable[..., GenTuiApp], capsys: pytest.CaptureFixture[str]
) -> None:
    app = app_factory(datasets={"A": (40, 3_000), "B": (40, 3_000)}, mean=200)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(
            lambda: app.runs and not app.runs[0].active, 60, "the run ended", pause=pilot.pause
        )
        await pilot.press("q")
        await wait_until(lambda: not app.is_running, 10, "the app left", pause=pilot.pause)
    capsys.readouterr()
    _finish(app, app.return_code)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    folder = app.runs[0].engine.config.output_dir if app.runs[0].engine else None
    assert folder is not None
    # Counted from the record files, not the panels' last snapshot: on a loaded machine the
    # run can end before its last snapshot reaches the panel (the rehearsal of 6 December
    # read 0 there against 6,240 written).
    written = sum(r["completion_tokens"] for name in "AB" for r in read_records(folder / name))
    assert written > 0
    assert lines[0].startswith(f"gen-tui: 2 datasets, {written:,} tokens written to "), lines
    assert str(folder).rstrip("/").split("/")[-1] + "/ this session" in lines[0]


def test_nothing_run_nothing_said(
    app_factory: Callable[..., GenTuiApp], capsys: pytest.CaptureFixture[str]
) -> None:
    app = app_factory(datasets={"A": (4, 1_000)}, autostart=False)
    _finish(app, 0)
    assert capsys.readouterr().err == ""


async def test_the_demo_never_points_to_the_folder_it_removes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tried again as a new user: the line named the demo's output folder, which the demo
    had just removed. It says the folder was temporary, and names no path in it."""
    app = demo_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(
            lambda: (s := snap(app, STAR)) is not None and s.tokens > 0, 120, "B2 writing",
            pause=pilot.pause,
        )  # fmt: skip
        end_started_runs(app.links[0])  # its drain is not this test's
        app.exit()
    capsys.readouterr()
    _finish(app, app.return_code)
    lines = capsys.readouterr().err.strip().splitlines()
    summary = [line for line in lines if "written to" in line]
    assert len(summary) == 1, lines
    assert f"written to {TEMPORARY} this session" in summary[0], summary
    assert str(tmp_path) not in summary[0] and "output/" not in summary[0], summary
