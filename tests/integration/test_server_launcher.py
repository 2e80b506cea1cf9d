"""The process launcher (issue 32): a recipe's server starts detached through the hosts'
guarded start with its environment and marker, its end is told with the signal, and a
second launcher (a reopened panel) adopts the same pid from the state file."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gen_tui.backends.servers.launcher import Exit, Launched, Launcher, LaunchError
from gen_tui.backends.servers.process import MARKER
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.runs import alive
from tests.support.servers import kill_servers, launcher_in, sim_recipe


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "servers"
    kill_servers(tmp_path / "servers")


async def test_start_kill_and_adopt(folder: Path) -> None:
    launcher = launcher_in(folder)
    recipe = sim_recipe("sim0", free_port(), env=(("SIM_NOTE", "x y"),))
    launched = await launcher.start(recipe)
    pid = int(launched.ref)
    environ = psutil.Process(pid).environ()
    assert environ[MARKER] == "sim0" and environ["SIM_NOTE"] == "x y"
    assert await launcher.exit_of(launched) is None
    (adopted,) = await launcher_in(folder).adopt()  # another gen-tui, same state file
    assert adopted == launched

    os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: not alive(pid), 10)
    ended = await wait_until_ended(launcher, launched)
    assert ended.signal == signal.SIGKILL and ended.code is None
    assert "SIGKILL" in ended.reason
    assert await launcher_in(folder).adopt() == []  # a dead pid is not adopted


async def wait_until_ended(launcher: Launcher, launched: Launched) -> Exit:
    for _ in range(200):
        ended = await launcher.exit_of(launched)
        if ended is not None:
            return ended
        await asyncio.sleep(0.05)
    raise AssertionError("exit_of never said the server ended")


async def test_an_early_exit_says_its_code_and_last_log_line(folder: Path) -> None:
    """Whether the start's settle sees it die (a LaunchError) or `exit_of` does later (a
    slow interpreter start), the line names the server and ends with its own last words."""
    launcher = launcher_in(folder)
    try:
        launched = await launcher.start(sim_recipe("bad", free_port(), "--slots", "0"))
    except LaunchError as exc:
        said = str(exc)
        assert said.startswith("server bad: ") and "exited at once" in said
    else:
        ended = await wait_until_ended(launcher, launched)
        assert ended.code == 2 and ended.signal is None
        said = ended.reason
        assert "exited with code 2" in said
    assert "\n" not in said and said.endswith("--slots: must be at least 1, got '0'")


async def test_a_missing_program_is_one_line(folder: Path) -> None:
    launcher = launcher_in(folder)
    recipe = sim_recipe("ghost", free_port())
    recipe = type(recipe)(recipe.name, ("/nonexistent/sglang-server", "--port", "1"), 1)
    with pytest.raises(LaunchError) as caught:
        await launcher.start(recipe)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("server ghost:")
    assert "/nonexistent/sglang-server" in message


LINGERING = """
import ctypes, os, pathlib, signal, sys, threading, time
go = pathlib.Path(sys.argv[1])
def last_thread():
    while not go.exists():
        time.sleep(0.02)
    time.sleep(1.5)  # the rest of the process still ending, as a big server's threads do
    os.kill(os.getpid(), signal.SIGKILL)
threading.Thread(target=last_thread).start()
while not go.exists():
    time.sleep(0.02)
ctypes.CDLL(None).pthread_exit(None)  # the first thread ends: a zombie in /proc from here
"""


def proc_state(pid: int) -> str:
    """The /proc state letter of `pid` ("-" when absent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "-"


async def test_the_signal_is_told_while_the_other_threads_still_end(
    folder: Path, tmp_path: Path
) -> None:
    """A killed process's first thread shows as a zombie (gone, for /proc) before waitpid
    can report the process, which waits for every other thread to end: the real-SGLang
    story once read "its exit status is unknown" for a `kill -9`. Here the first thread
    ends 1.5 s before the rest, which then dies of SIGKILL: the end says SIGKILL."""
    script = tmp_path / "lingering.py"
    script.write_text(LINGERING)
    go = tmp_path / "go"
    launcher = launcher_in(folder)
    recipe = sim_recipe("linger", free_port())
    recipe = type(recipe)(recipe.name, (sys.executable, str(script), str(go)), recipe.port)
    launched = await launcher.start(recipe)
    pid = int(launched.ref)
    assert await launcher.exit_of(launched) is None
    go.touch()
    await wait_until(lambda: proc_state(pid) == "Z", 10)
    ended = await launcher.exit_of(launched)  # asked at once: the rest still ends
    assert ended is not None
    assert ended.signal == signal.SIGKILL and "was killed by SIGKILL" in ended.reason
