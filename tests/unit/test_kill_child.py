"""A child asyncio started and that has just ended is left for asyncio to collect
(backends/aio.py's kill_child): `gen-tui servers stop` printed asyncio's "Unknown child
process pid N, will report returncode 255" about 1 try in 3, when the end of its signal
script (local.py's ProcessLines.close) met `Process.kill()`, whose `Popen.poll()` collected
the script before asyncio's child watcher could.

The race made certain: the loop is held (time.sleep) while the child ends, and its watcher
collects children on the loop (on 3.11 a SafeChildWatcher, as 3.12's pidfd watcher does),
so the child is ended and not yet collected when it is closed."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import warnings
from collections.abc import AsyncIterator

import pytest

from gen_tui.backends.aio import kill_child
from gen_tui.backends.hosts.local import LocalHost, ProcessLines


@pytest.fixture
async def collected_on_the_loop() -> AsyncIterator[None]:
    if sys.version_info >= (3, 12):  # its pidfd watcher collects on the loop already
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        before = asyncio.get_child_watcher()
        watcher = asyncio.SafeChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.set_child_watcher(watcher)
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_child_watcher(before)
            watcher.close()


async def test_a_script_that_ended_on_its_own_is_closed_without_a_warning(
    collected_on_the_loop: None, caplog: pytest.LogCaptureFixture, tmp_path: object
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    source = await LocalHost(str(tmp_path))._open_sh("echo verdict; exit 3")
    assert isinstance(source, ProcessLines)
    assert await source.readline() == "verdict\n"
    time.sleep(0.5)  # it ends meanwhile; nothing collects it while the loop is held
    await asyncio.wait_for(source.close(), 10)
    assert source.process.returncode == 3  # its own, not asyncio's 255 for "unknown"
    assert "Unknown child process" not in caplog.text, caplog.text


async def test_a_script_still_running_is_killed(tmp_path: object) -> None:
    source = await LocalHost(str(tmp_path))._open_sh("echo started; exec sleep 60")
    assert await source.readline() == "started\n"
    began = time.monotonic()
    await asyncio.wait_for(source.close(), 10)
    assert time.monotonic() - began < 5
    assert isinstance(source, ProcessLines) and source.process.returncode == -9


async def test_kill_child_leaves_a_collected_child_alone() -> None:
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    assert await asyncio.wait_for(process.wait(), 30) == 0
    kill_child(process)  # ended and collected: nothing to signal, no error
    assert process.returncode == 0


async def test_a_slurm_command_past_its_timeout_is_killed_and_collected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The other children asyncio starts (slurm.py's local_runner) end the same way."""
    from gen_tui.backends.servers.slurm import local_runner

    caplog.set_level(logging.WARNING, logger="asyncio")
    code, out, err = await asyncio.wait_for(local_runner(timeout=0.5)(["sleep", "60"]), 30)
    assert (code, out, err) == (124, "", "sleep: no answer within 0.5 s")
    assert "Unknown child process" not in caplog.text, caplog.text
