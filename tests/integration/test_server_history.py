"""The servers' history file (issue 32): a real `gen-tui sim` server supervised by the fleet,
killed with SIGKILL and restarted, leaves one JSON line per event beside the state file
(started, loading, healthy, exited with its signal, restarting, healthy again); a hostile
log line stays one bounded line; the file is cut to its newest half past its bound."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from gen_tui.backends.servers import history as history_module
from gen_tui.backends.servers.events import ServerEvent, ServerState
from gen_tui.backends.servers.fleet import Fleet
from gen_tui.backends.servers.history import DETAIL_CHARS, ServerHistory
from tests.support.ports import free_port
from tests.support.servers import Recorder, kill_servers, launcher_in, sim_recipe

S = ServerState


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "servers"
    kill_servers(tmp_path / "servers")


async def test_a_killed_server_leaves_its_events_in_the_history(
    folder: Path, http: aiohttp.ClientSession
) -> None:
    recipe = sim_recipe("sim0", free_port())
    launcher = launcher_in(folder)
    recorder = Recorder()
    fleet = Fleet(
        [recipe],
        {"sim0": recipe.url()},
        {"process": launcher},
        launcher.state,
        http,
        [recorder],
        check_s=0.2,
        grace_s=3.0,
    )
    await fleet.up()
    try:
        first = await recorder.reach(S.HEALTHY, timeout=60)
        assert first.ref is not None
        os.kill(int(first.ref), signal.SIGKILL)
        await recorder.reach(S.HEALTHY, 2, timeout=60)
    finally:
        await fleet.stop()
    lines = ServerHistory(folder).read()
    states = [line["state"] for line in lines]
    assert states == [
        *("starting", "loading", "healthy", "exited", "restarting"),
        *("starting", "loading", "healthy", "draining", "stopped"),
    ], states
    exited = lines[3]
    assert exited["server"] == "sim0" and exited["exit"] == "SIGKILL"
    assert exited["ref"] == first.ref  # the event names what exited (it was null)
    assert lines[5]["ref"] is None  # and a new start names no process before it has one
    assert f"pid {first.ref} was killed by SIGKILL" in exited["detail"]
    assert lines[4]["detail"].startswith("in ") and "healthy again" in lines[7]["detail"]
    assert all(isinstance(line["t"], float) for line in lines)


def test_event_text_is_one_bounded_line(tmp_path: Path) -> None:
    history = ServerHistory(tmp_path)
    hostile = "boom\x1b[2J\r\nsecond line" + "x" * 10_000
    history(ServerEvent("sim0", S.EXITED, time.time(), f"exited with code 3; {hostile}", "42"))
    (raw,) = (tmp_path / "history.jsonl").read_bytes().splitlines()
    (line,) = history.read()
    assert line["exit"] == "code 3" and line["ref"] == "42"
    assert "\x1b" not in line["detail"] and "\n" not in line["detail"]
    assert len(line["detail"]) <= DETAIL_CHARS + 40 and len(raw) < 1000  # and "… (N more)"


def test_the_history_is_cut_to_its_newest_half(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history_module, "HISTORY_BYTES", 4000)
    history = ServerHistory(tmp_path)
    for i in range(100):
        history(ServerEvent("sim0", S.RESTARTING, 1000.0 + i, f"in {i} s"))
    size = (tmp_path / "history.jsonl").stat().st_size
    lines = history.read()
    assert size <= 4000 and lines, size
    assert lines[-1]["detail"] == "in 99 s"  # the newest kept, whole lines only
    assert [line["t"] for line in lines] == sorted(line["t"] for line in lines)
