"""The demo on a shared machine: it offers only its own runs, and its folder always goes.

Real processes: a stand-in for someone else's `gen-tui run` (its command line matches the
default run pattern), the demo's own stale run, and `gen-tui --demo` itself in a terminal
(tmux) that is closed or signalled while `q` drains it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

from gen_tui.app.demo_tui import STALE
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.dialogs.run_list import RunsScreen
from gen_tui.app.hosts import Kill
from gen_tui.app.launch import demo_app
from gen_tui.backends.runs import RunIdentity
from gen_tui.widgets.run_table import RunTable

from .test_tui import panel, wait_for

# ---- point 14: the demo's `l` and `k` offer only what the demo started -----------------


def impostor(output_dir: Path) -> subprocess.Popen[bytes]:
    """Someone else's job, as the survey sees it: `... gen-tui run --output-dir DIR ...`."""
    argv = [sys.executable, "-c", "import time; time.sleep(600)", "gen-tui", "run"]
    argv += ["--output-dir", str(output_dir), "--datasets", STALE]
    process = subprocess.Popen(argv, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # exec'd: its command line is the one above
        if "gen-tui" in psutil.Process(process.pid).cmdline():
            return process
        time.sleep(0.05)
    raise AssertionError("the stand-in never started")


def identity_of(process: subprocess.Popen[bytes]) -> RunIdentity:
    proc = psutil.Process(process.pid)
    return RunIdentity("local", proc.pid, proc.create_time(), "", tuple(proc.cmdline()))


async def test_the_demo_lists_and_kills_only_the_runs_it_started(tmp_path: Path) -> None:
    elsewhere = impostor(tmp_path / "someone-else")  # before the demo, anywhere on the box
    root = tmp_path / "demo"
    root.mkdir()
    app = demo_app(root, autostart=False)  # the engine's panels are not what this is about
    link = app.links[0]
    others = [elsewhere]
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            monitor = await wait_for(pilot, lambda: link.monitor, 60)
            own = await wait_for(pilot, lambda: link.started and link.started[0], 120)
            await wait_for(pilot, lambda: own.pid in [r.pid for r in monitor.runs], 60)
            # A second stand-in names the demo's own folder and dataset: still not the demo's.
            others.append(impostor(root / "output"))
            since = time.time()
            await wait_for(pilot, lambda: monitor.surveyed_at > since + 0.1, 30)
            await wait_for(pilot, lambda: monitor.surveyed_at > since + 2.1, 30)
            listed = {run.pid for run in (*monitor.runs, *monitor.ended)}
            assert listed == {own.pid}, f"the demo lists {listed}, it started only {own.pid}"

            await pilot.press("l")
            runs = await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen)
            await pilot.pause(0.2)
            assert [row.pid for row in runs.rows()] == [own.pid]
            assert runs.query_one(RunTable).row_count == 1
            await pilot.press("k")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            body = str(app.screen.query_one("#confirm-body").render())
            assert f"pid {own.pid}" in body
            assert not any(f"pid {other.pid}" in body for other in others), body
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, RunsScreen))

            # `k` on the stale dataset's panel names the demo's run, not the stand-in.
            panel(app, STALE).focus()
            await pilot.press("k")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            body = str(app.screen.query_one("#confirm-body").render())
            assert f"pid {own.pid}" in body and f"pid {others[1].pid}" not in body, body
            await pilot.press("n")

            # Even asked directly (a stale identity, a bug), the demo's host refuses.
            for other in others:
                link.send(Kill(identity_of(other)))
            await wait_for(pilot, lambda: len(app.events) >= 2, 30)
            await pilot.pause(1.0)
            refused = [text for _, text in app.events if "not a run the demo started" in text]
            assert len(refused) == 2, app.events
        for other in others:
            assert other.poll() is None, f"pid {other.pid} was stopped by the demo"
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        for other in others:
            other.kill()
            other.wait()
