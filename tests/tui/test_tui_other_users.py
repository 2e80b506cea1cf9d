"""The run list on a shared box: another user's run is marked, and `k`/`r` on it are refused
at once, naming its owner; `r` on our own run shows the whole command and folder first.

Real processes: one of a second Unix user, one of ours, both naming datasets of the
watched output folder (see tests/integration/test_other_users.py for the host's own refusals).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen
from gen_tui.app.dialogs.run_list import RunsScreen, run_key
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.hosts import RunProcess
from gen_tui.widgets.run_table import RunTable
from tests.support.polling import wait_until
from tests.support.tui import SIZE, Notes
from tests.support.users import OTHER_USER, ensure_user

SLEEPER = "import time; time.sleep(120)"


def _spawn(argv: list[str], cwd: Path | str, user: int | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, cwd=cwd, user=user, stdin=subprocess.DEVNULL)


async def test_another_users_run_is_marked_and_k_r_refused_ours_shows_its_command(
    tmp_path: Path,
) -> None:
    other = ensure_user(OTHER_USER)
    out = tmp_path / "out"
    out.mkdir()
    where = tmp_path / "our folder"
    where.mkdir()
    long_note = "x" * 300  # past any cut the dialog once made (120 characters)
    theirs = _spawn(
        ["/usr/bin/python3", "-c", SLEEPER, "run_inference.py", "--datasets", "B1",
         "--output-dir", str(out)],
        "/",
        other.pw_uid,
    )  # fmt: skip
    ours = _spawn(
        [sys.executable, "-c", SLEEPER, "run_inference.py", "--datasets", "B2",
         "--output-dir", str(out), "--note", long_note],
        where,
    )  # fmt: skip
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    link = app.links[0]
    notes = Notes()

    def run_of(pid: int, ended: bool = False) -> RunProcess | None:
        monitor = link.monitor
        runs = (monitor.ended if ended else monitor.runs) if monitor is not None else ()
        return next((run for run in runs if run.pid == pid), None)

    try:
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            await wait_until(lambda: run_of(theirs.pid) and run_of(ours.pid), 30, pause=pilot.pause)
            await pilot.press("l")
            await wait_until(lambda: isinstance(app.screen, RunsScreen), pause=pilot.pause)
            table = app.screen.query_one(RunTable)
            their_key, our_key = run_key(run_of(theirs.pid)), run_key(run_of(ours.pid))
            await wait_until(lambda: table.row_count >= 2, pause=pilot.pause)
            assert str(table.get_row(their_key)[0]) == f"local · user {OTHER_USER}"
            assert str(table.get_row(our_key)[0]) == "local"

            refused = f"pid {theirs.pid} belongs to {OTHER_USER} (uid {other.pw_uid})"
            table.move_cursor(row=table.get_row_index(their_key))
            await pilot.press("k")
            await wait_until(
                lambda: notes.find(refused, "never stops another user's run"), pause=pilot.pause
            )
            assert isinstance(app.screen, RunsScreen), "a kill of another user's run was offered"
            await pilot.press("r")
            await wait_until(
                lambda: notes.find(refused, "never runs another user's"), pause=pilot.pause
            )
            assert isinstance(app.screen, RunsScreen)
            assert theirs.poll() is None and psutil.Process(theirs.pid).status() != "stopped"

            # Our own run, once it ended: r shows the whole command and where it runs.
            os.kill(ours.pid, signal.SIGTERM)
            ours.wait()
            await wait_until(lambda: run_of(ours.pid, ended=True), 30, pause=pilot.pause)
            await wait_until(
                lambda: str(table.get_row(our_key)[2]) == "ended", 30, pause=pilot.pause
            )
            table.move_cursor(row=table.get_row_index(our_key))
            await pilot.press("r")
            modal = await wait_until(
                lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
            )
            command = str(modal.query_one("#resume-command").render())
            assert command.startswith(f"Command: {sys.executable} -c ") and long_note in command
            assert str(modal.query_one("#resume-cwd").render()) == f"In: {where}"
            await pilot.press("5", "k")
            await wait_until(
                lambda: str(modal.query_one("#resume-command").render()).endswith(
                    "--max-tokens-per-dataset 5000"
                ),
                pause=pilot.pause,
            )
            await pilot.press("escape")
            assert not isinstance(app.screen, ConfirmScreen)
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        for process in (theirs, ours):
            process.kill()
            process.wait()
