"""The servers' state file and the words of an exit (issue 32): what a reopened gen-tui
adopts, how restarts are counted per hour, and how an end is said."""

from __future__ import annotations

import time
from pathlib import Path

from gen_tui.backends.hosts import RunIdentity
from gen_tui.backends.servers.launcher import Launched
from gen_tui.backends.servers.process import exit_words, same_start
from gen_tui.backends.servers.state import HOUR_S, StateFile

IDENTITY = RunIdentity("local", 42, 1000.0, "boot", ("python", "-m", "sglang"), 777)


def test_a_launch_round_trips_and_a_stop_keeps_the_restarts(tmp_path: Path) -> None:
    state = StateFile(tmp_path)
    launched = Launched("gpu0", "42", "local", 30000, 5.0, "/l/gpu0.log", IDENTITY)
    state.note_launch("process", launched)
    state.note_restart("gpu0", "process", at=time.time() - 2 * HOUR_S)  # long ago
    entry = state.note_restart("gpu0", "process")
    assert StateFile(tmp_path).read()["gpu0"].launched == launched
    assert entry.recent() == 1 and entry.total_restarts == 2
    state.note_stop("gpu0")
    kept = StateFile(tmp_path).read()["gpu0"]
    assert kept.launched is None and kept.recent() == 1 and kept.total_restarts == 2
    assert len(kept.restarts) == 1  # those older than an hour are not kept


def test_an_unreadable_state_file_adopts_nothing(tmp_path: Path) -> None:
    for body in (b"{not json", b"[]", b'{"a": 3, "b": {"launcher": 1}}', b"\xff\xfe"):
        (tmp_path / "servers.json").write_bytes(body)
        assert StateFile(tmp_path).read() == {}
    (tmp_path / "servers.json").write_text('{"a": {"launcher": "process", "launched": {"x": 1}}}')
    assert StateFile(tmp_path).read()["a"].launched is None  # another version's: started anew


def test_the_same_start_is_pid_boot_and_start_time_not_the_title() -> None:
    retitled = RunIdentity("local", 42, 1000.0, "boot", ("sglang::server",), 777)
    assert same_start(retitled, IDENTITY)
    assert not same_start(RunIdentity("local", 42, 1000.0, "boot", (), 778), IDENTITY)
    assert not same_start(RunIdentity("local", 42, 1000.0, "other", (), 777), IDENTITY)
    assert not same_start(None, IDENTITY)


def test_exit_words() -> None:
    assert exit_words(-9) == (None, 9, "was killed by SIGKILL")
    assert exit_words(3) == (3, None, "exited with code 3")
    assert exit_words(None)[2].startswith("is gone")
