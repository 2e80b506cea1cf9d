"""Bytes that are not UTF-8 in a run's command line and folder, through the real app.

A process on the box may carry any bytes in its argv and working folder (another user's,
or a script fed a Latin-1 file name). They reach gen-tui as surrogate escapes, which no
terminal encoding can write: shown raw they crash the drawing of the screen, or appear as
`\\udcff`. Real processes, listed locally and over a real sshd (the watcher on the box
sends them through JSON): the run is listed, its command and folder shown with U+FFFD for
each such byte in the run list and in `r`'s dialog, and the app stays up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gen_tui.app.dialogs.modals import ResumeScreen
from gen_tui.app.dialogs.run_list import RunsScreen, run_key
from gen_tui.app.host_sources import HostSource, host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.hosts import RunProcess
from gen_tui.widgets.run_table import RunTable
from tests.support.polling import wait_until
from tests.support.sshd import Sshd
from tests.support.tui import SIZE, Notes

SLEEPER = "import time; time.sleep(120)"


def _shown(text: str) -> str:
    """`text` as the screen holds it: must encode to UTF-8 as a terminal writes it."""
    text.encode("utf-8")
    assert not any("\ud800" <= char <= "\udfff" for char in text), ascii(text)
    return text


@pytest.mark.parametrize("where", ["local", "ssh"])
async def test_a_run_with_bytes_that_are_not_utf8_is_listed_and_shown_with_fffd(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    folder = os.path.join(os.fsencode(tmp_path), b"dir\xe9")  # Latin-1 e-acute
    os.mkdir(folder)
    argv = [os.fsencode(sys.executable), b"-c", SLEEPER.encode(), b"run_inference.py",
            b"--note", b"\xff\xfe caf\xe9", b"--datasets", b"B1", b"--output-dir",
            os.fsencode(out)]  # fmt: skip
    process = subprocess.Popen(argv, cwd=folder, stdin=subprocess.DEVNULL)
    source: HostSource
    if where == "local":
        source = host_source("local", str(out))
    else:
        sshd: Sshd = request.getfixturevalue("sshd")
        source = host_source(sshd.alias, str(out), options=sshd.options())
    app = GenTuiApp(None, hosts=[source])
    link = app.links[0]
    notes = Notes()

    def run_of(ended: bool = False) -> RunProcess | None:
        monitor = link.monitor
        runs = (monitor.ended if ended else monitor.runs) if monitor is not None else ()
        return next((run for run in runs if run.pid == process.pid), None)

    try:
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            run = await wait_until(run_of, 30, pause=pilot.pause)
            assert run.identity.cmdline[5] == "\udcff\udcfe caf\udce9"  # the real bytes, kept
            await pilot.press("l")
            await wait_until(lambda: isinstance(app.screen, RunsScreen), pause=pilot.pause)
            table = app.screen.query_one(RunTable)
            key = run_key(run)
            await wait_until(lambda: table.row_count >= 1, pause=pilot.pause)
            cells = [_shown(str(cell)) for cell in table.get_row(key)]
            assert any("\ufffd\ufffd caf\ufffd" in cell for cell in cells), cells

            os.kill(process.pid, signal.SIGTERM)
            process.wait()
            await wait_until(lambda: run_of(ended=True), 30, pause=pilot.pause)
            await wait_until(lambda: str(table.get_row(key)[2]) == "ended", 30, pause=pilot.pause)
            table.move_cursor(row=table.get_row_index(key))
            await pilot.press("r")
            modal = await wait_until(
                lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
            )
            command = _shown(str(modal.query_one("#resume-command").render()))
            assert "--note '\ufffd\ufffd caf\ufffd'" in command, command
            cwd = _shown(str(modal.query_one("#resume-cwd").render()))
            assert cwd == f"In: {tmp_path}/dir\ufffd", cwd
            await pilot.press("escape")
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        process.kill()
        process.wait()
