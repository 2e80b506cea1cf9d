"""Drain notices (backends/drain_notice.py): what the supervisor writes before a stop's
drain, and how a run sent straight to the servers reads them: a notice takes its server
out of the picking (its requests in flight are left alone) until it is gone; a file that is
not a notice is ignored, said once; a URL of another machine is never matched by a port."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import pytest

from gen_tui.backends.drain_notice import (
    MAX_NOTICE_BYTES,
    NOTICE_FOLDER,
    local_notice_folder,
    local_port,
    notice_keys,
    notice_node,
    notice_text,
    read_notices,
    remove_notice,
    this_machine,
    write_notice,
)
from gen_tui.backends.servers.state import local_folder
from tests.support.engine import notice_runner
from tests.support.polling import wait_until


def test_a_notice_written_is_read_and_gone_once_removed(tmp_path: Path) -> None:
    folder = tmp_path / "draining"
    assert read_notices(folder).ports == frozenset()  # no folder: nothing drains
    write_notice(folder, 30001, "http://127.0.0.1:30001", 30.0)
    write_notice(folder, 30002, "http://127.0.0.1:30002", 30.0)
    assert read_notices(folder).ports == {30001, 30002}
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []  # no temp left
    assert remove_notice(folder, 30001) is True
    assert remove_notice(folder, 30001) is False
    notices = read_notices(folder)
    assert notices.ports == {30002} and notices.bad == ()


def test_files_that_are_not_notices_are_ignored_and_said(tmp_path: Path) -> None:
    folder = tmp_path / "draining"
    write_notice(folder, 30001, "http://127.0.0.1:30001", 30.0)
    (folder / "30002.json").write_text("{not json")
    (folder / "30003.json").write_text(json.dumps({"port": 30004}))  # not its own port
    (folder / "30005.json").write_text(json.dumps([30005]))
    (folder / "30006.json").write_bytes(b" " * (MAX_NOTICE_BYTES + 1) + b'{"port": 30006}')
    (folder / ".notice.abc").write_text("being written")
    (folder / "notes.txt").write_text("someone else's")
    notices = read_notices(folder)
    assert notices.ports == {30001}
    why = {Path(path).name: reason for path, reason in notices.bad}
    assert why == {
        "30002.json": "not JSON",
        "30003.json": "not a drain notice (no port, or not the one of its name)",
        "30005.json": "not a drain notice (no port, or not the one of its name)",
        "30006.json": f"larger than {MAX_NOTICE_BYTES} bytes",
    }


def test_only_a_url_of_this_machine_has_a_local_port() -> None:
    local = this_machine()
    assert local_port("http://127.0.0.1:30001", local) == 30001
    assert local_port("http://127.0.1.1:30001/", local) == 30001
    assert local_port("http://localhost:8000/v1", local) == 8000
    assert local_port("http://[::1]:30001", local) == 30001
    assert local_port(f"http://{socket.gethostname()}:30001", local) == 30001
    assert local_port("http://localhost", local) == 80
    assert local_port("https://localhost", local) == 443
    assert local_port("http://gpu-node-7:30001", local) is None  # another machine's 30001
    assert local_port("https://api.example.com", local) is None
    assert local_port("http://localhost:99999", local) is None  # not a port
    assert local_port("not a url", local) is None


def test_the_runs_folder_is_the_supervisors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert local_notice_folder() == local_folder() / NOTICE_FOLDER


async def test_a_run_sends_a_draining_server_nothing_new_until_its_notice_goes(
    tmp_path: Path,
) -> None:
    near, other, far = "http://127.0.0.1:30001", "http://127.0.0.1:30002", "http://gpu-7:30001"
    said: list[str] = []
    runner = notice_runner(tmp_path, [near, other, far], said)
    signals = runner.signals
    drained, kept, remote = runner.servers
    drained.outstanding = 3  # in flight before the drain: left to finish
    folder = tmp_path / "draining"
    write_notice(folder, 30001, near, 30.0)
    (folder / "30009.json").write_text("{")
    watch = asyncio.create_task(runner.watch_drains(folder, poll_s=0.02))
    try:
        await wait_until(lambda: drained.draining, 5, "the notice read")
        assert not remote.draining  # port 30001 of another machine: not this notice's
        assert not drained.has_room() and not drained.has_slot()
        assert drained.outstanding == 3
        picked = [runner.reserve() for _ in range(6)]
        assert drained not in picked and set(picked) == {kept, remote}
        assert drained.status.startswith("drain notice"), drained.status
        signals.wake.clear()
        remove_notice(folder, 30001)
        await wait_until(lambda: not drained.draining, 5, "the notice gone")
        assert signals.wake.is_set()  # the dispatcher looks again
        assert drained.has_room()
        await asyncio.sleep(0.1)  # several more looks at the bad file
    finally:
        watch.cancel()
    assert sum("30009.json: ignored: not JSON" in line for line in said) == 1, said
    assert sum(f"{near} is being drained before a stop" in line for line in said) == 1, said
    assert sum(f"{near} is no longer drained" in line for line in said) == 1, said


async def test_a_run_sent_only_to_apis_does_not_look(tmp_path: Path) -> None:
    """An API's URL (no port of a server of ours) can have no notice."""
    runner = notice_runner(tmp_path, ["https://api.example.com/v1"], [])
    write_notice(tmp_path / "draining", 443, "http://127.0.0.1:443", 30.0)
    await asyncio.wait_for(runner.watch_drains(tmp_path / "draining", poll_s=0.02), 5)
    assert not runner.servers[0].draining


def test_a_batch_job_s_notice_names_its_node() -> None:
    local = this_machine()
    here = socket.gethostname().lower()
    assert notice_keys("http://gpu-7:30001/v1", local) == [("gpu-7", 30001)]
    assert ("gpu-7", 30001) not in notice_keys("http://127.0.0.1:30001", local)
    assert notice_keys("http://127.0.0.1:30001", local)[0] == (None, 30001)
    assert (here, 30001) in notice_keys("http://127.0.0.1:30001", local)  # a run on NODE
    assert notice_keys("https://api.example.com/v1", local) == []  # no port: not a job's
    assert notice_node("http://GPU-7.cluster:30001") == "gpu-7.cluster"
    assert notice_node("http://[fe80::1]:30001") is None


async def test_a_run_sent_to_a_node_reads_that_node_s_notice(tmp_path: Path) -> None:
    """`PORT@NODE.json` drains a run's `http://NODE:PORT` (a batch job's server) and one
    of this machine's own when the run is on NODE; never another node's same port, and a
    notice for this machine's port (`PORT.json`) never a node's."""
    here = socket.gethostname().lower()
    far, other_node, near = "http://gpu-7:30001", "http://gpu-8:30001", "http://127.0.0.1:30002"
    said: list[str] = []
    runner = notice_runner(tmp_path, [far, other_node, near], said)
    on_gpu7, on_gpu8, local = runner.servers
    folder = tmp_path / "draining"
    write_notice(folder, 30001, far, 30.0)  # this machine's 30001: not gpu-7's
    write_notice(folder, 30001, far, 30.0, node="gpu-7")
    write_notice(folder, 30002, f"http://{here}:30002", 30.0, node=here)
    (folder / "30003@gpu-9.json").write_text(json.dumps({"port": 30003, "node": "gpu-8"}))
    notices = read_notices(folder)
    assert notices.ports == {30001} and set(notices.on_nodes) == {("gpu-7", 30001), (here, 30002)}
    assert [why for _path, why in notices.bad] == [
        "not a drain notice (its node is not the one of its name)"
    ]
    watch = asyncio.create_task(runner.watch_drains(folder, poll_s=0.02))
    try:
        await wait_until(lambda: on_gpu7.draining and local.draining, 5, "the notices read")
        assert not on_gpu8.draining
        remove_notice(folder, 30001, node="gpu-7")
        await wait_until(lambda: not on_gpu7.draining, 5, "gpu-7's notice gone")
        assert local.draining and not on_gpu8.draining
    finally:
        watch.cancel()
    assert sum(f"{far} is being drained before a stop" in line for line in said) == 1, said


def test_the_watcher_writes_a_notice_whole_and_refuses_a_bad_request(tmp_path: Path) -> None:
    """The watcher's `--notice` (what a panel sends over SSH): the notice written whole,
    read back by a run as a notice (its writer this process's link, or the panel's named);
    a name that is a path, or a notice that is not an object, is refused in one line."""
    from gen_tui.backends.watcher import notice_request

    folder = tmp_path / "draining"
    text = notice_text(30001, "http://127.0.0.1:30001", 30.0, 5.0)
    said = notice_request({"folder": str(folder), "name": "30001.json", "notice": json.loads(text)})
    assert said["type"] == "notice" and said["path"] == str(folder / "30001.json")
    assert read_notices(folder).ports == {30001}
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert [p.name for p in folder.iterdir()] == ["30001.json"]  # no temporary file left
    for bad, why in (
        ({"folder": str(folder), "name": "../30001.json", "notice": {}}, "a file name"),
        ({"folder": str(folder), "name": "30001.json", "notice": [1]}, "a JSON object"),
        ({"folder": str(folder), "name": "30001.json", "notice": {"x": "y" * 5000}}, "at most"),
    ):
        with pytest.raises(ValueError, match=why):
            notice_request(bad)


def _gone_writer(link: bool) -> dict[str, object]:
    """A writer of this machine that was a process and is gone (an SSH link's session
    process when `link`)."""
    import subprocess
    import sys

    from gen_tui.backends.drain_notice import process_start

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = process_start(child.pid)
    child.kill()
    child.wait(10)
    writer: dict[str, object] = {"host": socket.gethostname(), "pid": child.pid}
    writer["started"] = started
    if link:
        writer["link"] = "the SSH session of the panel's link"
    return writer


def _notice_by(folder: Path, port: int, writer: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data = json.loads(notice_text(port, f"http://127.0.0.1:{port}", 60.0, 5.0))
    (folder / f"{port}.json").write_text(json.dumps(dict(data, writer=writer)))


def test_a_gone_link_writer_s_notice_holds_for_a_reconnect_then_goes(tmp_path: Path) -> None:
    """Issue 32's gap: a notice written over SSH names the panel's link's session process,
    which a dropped link ends; the panel writes the notice again on its reconnect. Read with
    a memory, it holds LINK_HOLD_S from the first look that saw its writer gone (said), then
    is a dead writer's; a writer that is no link's (a local panel) is dropped at once, as is
    any notice read with no memory; a notice written again for a live writer is honoured and
    its lapse forgotten."""
    from gen_tui.backends.drain_notice import LINK_HOLD_S, LapseKey

    folder = tmp_path / "draining"
    link, local = _gone_writer(link=True), _gone_writer(link=False)
    _notice_by(folder, 30001, link)
    _notice_by(folder, 30002, local)
    lapsed: dict[LapseKey, float] = {}
    first = read_notices(folder, lapsed)
    assert first.ports == {30001}, first
    assert [Path(path).name for path, _ in first.held] == ["30001.json"]
    assert "still honoured 5 s for the panel to reconnect" in first.held[0][1]
    assert [Path(path).name for path, _ in first.bad] == ["30002.json"]
    assert len(lapsed) == 1
    assert read_notices(folder, lapsed).ports == {30001}  # a look later: still held
    assert read_notices(folder).ports == frozenset()  # no memory: no hold
    for key in lapsed:  # LINK_HOLD_S since the first look that saw it gone
        lapsed[key] -= LINK_HOLD_S
    late = read_notices(folder, lapsed)
    assert late.ports == frozenset() and late.held == ()
    why = dict(late.bad)[str(folder / "30001.json")]
    assert why.startswith(f"its writer (pid {link['pid']}, this machine's) is gone")
    assert "not back within 5 s" in why
    assert read_notices(folder, lapsed).ports == frozenset()  # and stays dropped
    write_notice(folder, 30001, "http://127.0.0.1:30001", 60.0)  # the reconnect's: alive
    again = read_notices(folder, lapsed)
    assert again.ports == {30001} and again.held == () and lapsed == {}


def test_a_link_notice_past_its_lease_is_left_behind_though_its_writer_lives(
    tmp_path: Path,
) -> None:
    """A panel that dies behind a frozen link: its link's session process (the notice's
    writer) lives on until sshd gives it up, two hours by default, and nothing renews the
    notice. Its lease (`lease_s`, the file's time) ends it: honoured while renewed, left
    behind (said) past it; a notice without a lease (an older panel's) holds as before."""
    import os

    from gen_tui.backends.drain_notice import LINK_LEASE_S

    folder = tmp_path / "draining"
    alive: dict[str, object] = json.loads(notice_text(1, "http://127.0.0.1:1", 1.0))["writer"]
    link = dict(alive, link="the SSH session of the panel's link")
    for port, lease in ((30003, LINK_LEASE_S), (30004, None)):
        _notice_by(folder, port, link)
        if lease is not None:
            path = folder / f"{port}.json"
            path.write_text(json.dumps(dict(json.loads(path.read_text()), lease_s=lease)))
    assert read_notices(folder, {}).ports == {30003, 30004}  # just renewed: honoured
    old = time.time() - LINK_LEASE_S - 1
    for port in (30003, 30004):
        os.utime(folder / f"{port}.json", (old, old))
    late = read_notices(folder, {})
    assert late.ports == {30004}, late
    why = dict(late.bad)[str(folder / "30003.json")]
    assert why.startswith("not renewed by the panel behind its SSH link within its lease (30 s)")
    os.utime(folder / "30003.json")  # renewed (the panel's touch): honoured again
    assert read_notices(folder, {}).ports == {30003, 30004}
