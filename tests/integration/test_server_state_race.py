"""The servers' state file written by two gen-tui processes at once (issue 32): a panel
and `gen-tui servers` each note restarts, launches and stops; with the file's lock none
of them is lost under the other's write (a read-change-write without it loses some)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gen_tui.backends.servers.state import StateFile

NOTES = 150
WRITER = """
import sys, time
from pathlib import Path
from gen_tui.backends.servers.launcher import Launched
from gen_tui.backends.servers.state import StateFile

folder, me, notes = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
state = StateFile(folder)
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()  # both start together
for i in range(notes):
    state.note_restart("shared", "process")
    state.note_launch("process", Launched(me, str(i), "local", 1, time.time(), "x.log"))
state.note_stop(me)
"""


def test_two_processes_noting_at_once_lose_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "servers"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(folder), name, str(NOTES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("panel", "cli")
    ]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        assert writer.wait(120) == 0
    entries = StateFile(folder).read()
    assert entries["shared"].total_restarts == 2 * NOTES
    assert entries["shared"].recent() == 2 * NOTES
    for name in ("panel", "cli"):  # each one's own launches and its stop, none lost
        assert name in entries and entries[name].launched is None
