"""A run's details from `l` (issue 31, point 12 and the power users' point 3): the whole
command, wrapped at 80 columns and never cut, its working folder, output folder, start time,
owner and pid; `c` copies the command, as shown, to the clipboard (OSC 52).

A real process of ours whose command line carries a long argument, Rich markup and an OSC 52
escape of its own: it is shown and copied as text, the escape made visible.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

from gen_tui.app.dialogs.run_detail import RunDetailScreen
from gen_tui.app.dialogs.run_list import RunsScreen, run_key
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.hosts import RunProcess
from gen_tui.widgets.run_table import RunTable
from tests.support.polling import wait_until
from tests.support.runs import standin_argv
from tests.support.tui import SIZE, Notes

HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07"  # a clipboard write of its own, if it reached the terminal


def _lines(screen: RunDetailScreen, field: str) -> list[str]:
    """The field's lines as drawn."""
    widget = screen.query_one(f"#detail-{field}")
    return [widget.render_line(y).text for y in range(widget.size.height)]


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


async def test_enter_shows_a_runs_command_whole_and_c_copies_it(
    tmp_path: Path, standin: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    where = tmp_path / "our folder"
    where.mkdir()
    argv = standin_argv(
        standin, str(out), "B2", "--note", "x" * 700, "--title", f"[b]bold[/b] {HOSTILE}"
    )
    ours = subprocess.Popen(argv, cwd=where, stdout=subprocess.DEVNULL, start_new_session=True)
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    link = app.links[0]
    notes = Notes()

    def run_of(pid: int) -> RunProcess | None:
        monitor = link.monitor
        return next((r for r in monitor.runs if r.pid == pid), None) if monitor else None

    try:
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            run = await wait_until(lambda: run_of(ours.pid), 30, pause=pilot.pause)
            await pilot.press("l")
            runs = await wait_until(
                lambda: isinstance(app.screen, RunsScreen) and app.screen, pause=pilot.pause
            )
            table = runs.query_one(RunTable)
            await wait_until(lambda: table.row_count >= 1, pause=pilot.pause)
            table.move_cursor(row=table.get_row_index(run_key(run)))
            await pilot.press("enter")
            screen = await wait_until(
                lambda: isinstance(app.screen, RunDetailScreen) and app.screen, pause=pilot.pause
            )
            await pilot.pause()

            shown = shlex.join(argv).replace("\x1b", "\ufffd").replace("\x07", "\ufffd")
            lines = _lines(screen, "command")
            assert len(lines) > 10, "a 900-character command at 80 columns wraps"
            assert all(len(line.rstrip()) <= SIZE[0] for line in lines)
            assert _squeezed("".join(lines)) == _squeezed(f"Command: {shown}")  # never cut
            assert "[b]bold[/b]" in "".join(lines)  # text, not markup
            assert not any("\x1b" in line or "\x07" in line for line in lines)

            def field(name: str) -> str:
                # a long path wraps where the screen ends, inside a word or at a space:
                # compared without the white space (as the command above)
                return _squeezed("".join(_lines(screen, name)))

            assert field("cwd") == _squeezed(f"Working folder: {where}")
            assert field("output") == _squeezed(f"Output: {out}")
            assert field("datasets") == "Datasets:B2"
            assert field("pid") == _squeezed(f"Pid: {ours.pid} on local")
            assert field("owner").endswith(f"(uid{run.uid})(you)")
            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.identity.start_time))
            assert field("started").startswith(_squeezed(f"Started: {stamp}"))
            assert field("started").endswith("ago)")

            await pilot.press("c")
            await wait_until(lambda: notes.find("copied to the clipboard"), pause=pilot.pause)
            assert app.clipboard == shown
            assert notes.find(f"pid {ours.pid}", "control characters replaced")

            await pilot.press("escape")
            await wait_until(lambda: app.screen is runs, pause=pilot.pause)
            await pilot.press("i")  # the key does the same as Enter
            await wait_until(lambda: isinstance(app.screen, RunDetailScreen), pause=pilot.pause)
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        ours.kill()
        ours.wait()
