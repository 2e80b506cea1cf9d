"""The defects the link chaos scenario (test_link_chaos.py) found, each pinned with the fault
at its exact moment: a command, a listing, a kill's file check, a kill or a resume's check
or start cut off or frozen by the link.

Each fault is dealt to the real sshd session serving a fresh connection (`link.Faults`), and
what is then true is read from /proc, not from gen-tui."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.hosts import KillResult, ResumeRefused, RunError, SSHHost
from gen_tui.backends.hosts.connection import Disconnected, SSHConnection
from tests.support.polling import wait_until
from tests.support.sshd import Sshd, python38

from .link import KEEPALIVE, RAW, Faults, later
from .procs import processes_with


@pytest.fixture
async def link(sshd: Sshd, tmp_path: Path) -> Any:
    """A host over a fresh connection whose `python3` takes a second to start, so that a
    listing is still running when the fault lands; and the faults for that connection."""
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nsleep 1\nexec {python38() or "python3"} "$@"\n')
    slow.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    host = SSHHost("gpu-box", sshd.alias, str(out), options=sshd.options(**KEEPALIVE))
    host.python = str(slow)
    host.connection.backoff_s = (0.2, 0.5)
    await host.connect()
    faults = Faults(sshd, host.connection)
    yield host, faults
    faults.thaw()
    for pid, _, _ in processes_with(str(out)):  # what a test started there, by pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    await host.close()


def cut_during(faults: Faults, action: Callable[..., Awaitable[Any]], after_s: float = 0.3) -> Any:
    """`action`, with our sshd session killed `after_s` into it."""

    async def cut(*args: Any, **kwargs: Any) -> Any:
        task = asyncio.ensure_future(action(*args, **kwargs))
        await asyncio.sleep(after_s)
        await faults.strike("kill", 0)
        return await task

    return cut


STANDIN = """
import os, signal, sys, time
folder = os.path.join(sys.argv[sys.argv.index("--output-dir") + 1], "D")
os.makedirs(folder, exist_ok=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
with open(os.path.join(folder, "raw_responses.jsonl"), "ab", buffering=0) as handle:
    while True:
        handle.write(b'{"sample_id": "%d", "completion_tokens": 1}\\n' % time.time_ns())
        time.sleep(0.05)
"""


def standin_template(tmp_path: Path) -> list[str]:
    """A user's own `run_inference.py` (no lock), as a host's run template."""
    script = tmp_path / "scripts" / "run_inference.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(STANDIN)
    return [sys.executable, str(script), "--output-dir", str(tmp_path / "out")]


@pytest.mark.parametrize("kind", ["kill", "freeze"])
async def test_a_command_cut_off_by_the_link_raises_disconnected(sshd: Sshd, kind: str) -> None:
    # asyncssh returns a command cut off by a lost link with no exit status and what output
    # arrived: that passed for a result ("the start command failed", "needs Python 3.8").
    connection = SSHConnection(sshd.alias, sshd.options(**KEEPALIVE), backoff_s=(0.2, 0.5))
    await connection.start()
    faults = Faults(sshd, connection)
    try:
        fault = asyncio.ensure_future(later(0.5, faults.strike(kind, 4.0)))
        with pytest.raises(Disconnected, match=r"link lost before the command finished \(.+\)"):
            await connection.run("echo before; sleep 8; echo after", timeout=30)
        await fault
        assert (await connection.run("echo again", timeout=30)).stdout == "again\n"
    finally:
        faults.thaw()
        await connection.close()


async def test_a_listing_cut_off_by_the_link_says_so_not_python(link: Any) -> None:
    host, faults = link
    with pytest.raises(Disconnected, match=r"link lost|closed"):
        await cut_during(faults, host.survey)()  # was: "the host needs Python 3.8"


async def test_a_kill_whose_file_check_is_cut_off_still_reports_the_stop(
    link: Any, tmp_path: Path
) -> None:
    host, faults = link
    identity = await host.start(
        [*standin_template(tmp_path), "--datasets", "D"], str(tmp_path / "d.log")
    )
    raw = tmp_path / "out" / "D" / RAW
    await wait_until(raw.exists, 30, "the stand-in writes")
    sample, cut = host._sizes, cut_during(faults, host._sizes)

    async def sizes(paths: Any, samples: int = 3) -> Any:
        # The fault lands while the check after the stop samples the sizes (the one sample
        # taken before SIGTERM, to count the drain, goes through).
        return await (sample if samples == 1 else cut)(paths, samples)

    host._sizes = sizes
    outcome = await host.kill(identity, grace_s=10, files=[str(raw)])
    # Was: "its record files are STILL GROWING: another writer?" (a cut-off answer read as
    # sizes), then, once the cut raised, an error although the run had stopped.
    assert outcome.result is KillResult.STOPPED, outcome
    assert outcome.files_stable is None and "could not be checked" in outcome.detail, outcome
    assert identity.pid not in [pid for pid, _, _ in processes_with(str(raw.parent.parent))]


async def test_a_kill_into_a_frozen_link_is_a_run_error_and_sent_nothing(
    link: Any, tmp_path: Path
) -> None:
    host, faults = link
    argv = [*standin_template(tmp_path), "--datasets", "D"]
    identity = await host.start(argv, str(tmp_path / "d.log"))
    fault = asyncio.ensure_future(faults.strike("freeze", 4.0))
    await wait_until(lambda: bool(faults.frozen), 10, "the session frozen")
    # Was a bare `Disconnected: ... SSH connection closed` (the panel's "error"), which said
    # nothing about the kill; the channel never opened, so the run must still be there.
    with pytest.raises(RunError, match=rf"link lost while stopping pid {identity.pid} .*again"):
        await host.kill(identity, grace_s=10)
    await fault
    assert identity.pid in [pid for pid, _, _ in processes_with(str(tmp_path / "out"))]
    assert (await host.kill(identity, grace_s=10)).result is KillResult.STOPPED


@pytest.mark.parametrize("phase", ["check", "start"])
async def test_a_resume_cut_off_says_whether_it_started(
    link: Any, tmp_path: Path, phase: str
) -> None:
    host, faults = link
    host.template = standin_template(tmp_path)
    out = tmp_path / "out"

    def standins() -> list[int]:
        return [pid for pid, _, cmd in processes_with(str(out)) if "run_inference.py" in cmd[1]]

    if phase == "check":
        host._ps = cut_during(faults, host._ps)  # the listing that looks for a live writer
        with pytest.raises(RunError, match=r"cannot check for a live writer .*nothing was started"):
            await host.resume("D", 1000)
        await asyncio.sleep(1)
        assert standins() == []
        return
    spawn = host._spawn

    async def spawn_then_cut(*args: Any) -> Any:
        started = await spawn(*args)
        host._ps = cut_during(faults, ps)  # the listing that checks what started
        return started

    ps = host._ps
    host._spawn = spawn_then_cut
    with pytest.raises(RunError, match=r"started pid \d+, but the link was lost .* may be running"):
        await host.resume("D", 1000)
    host._ps, host._spawn = ps, spawn
    await wait_until(lambda: len(standins()) == 1, 10, "the one started run")
    with pytest.raises(ResumeRefused, match="is writing it"):  # pressing r again is refused
        await host.resume("D", 1000)
    assert len(standins()) == 1
