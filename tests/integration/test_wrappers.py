"""`k` stops the process that writes the dataset, never a multiplexer or wrapper around it.

A user's lock-less script runs in a GNU screen window, under `runuser`, a `bash -lc` and a
pyenv-style shim (`bash shim python run_inference.py`): every process of that chain names
the run on its command line. The run list once showed them all and `k` stopped the oldest,
the SCREEN daemon, taking an unrelated window with it. Real processes; the daemon is a
Python stand-in whose argv[0] is `SCREEN`, as GNU screen's is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from gen_tui.backends.hosts import KillResult, LocalHost, SSHHost
from tests.support.polling import wait_until, wait_until_sync
from tests.support.runs import alive

AnyHost = LocalHost | SSHHost
PYTHON = "/usr/bin/python3"

FAKE_SCREEN = r"""
import subprocess, sys, time
# Two windows, each a session of its own, as GNU screen makes them: the run, and some
# other work of the same user that must outlive a `k` on the run.
# (sys.executable is empty: argv[0] is SCREEN.)
window = ["/usr/bin/python3", "-c", "import time; time.sleep(300)"]
windows = [sys.argv[sys.argv.index("-S") + 2 :], window]
for argv in windows:
    subprocess.Popen(argv, start_new_session=True)
time.sleep(300)
"""

SHIM = '#!/bin/sh\n# like pyenv-exec: runs the program as a child, not with exec\n"$@"\nexit $?\n'


@dataclass
class Chain:
    screen: subprocess.Popen[bytes]
    writer: psutil.Process
    window: psutil.Process
    wrappers: list[psutil.Process]


def cmdline(process: psutil.Process) -> list[str]:
    """Its command line; [] once gone (a login shell's profile runs short-lived helpers)."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


@pytest.fixture
def screen_chain(host: AnyHost, standin: Path, tmp_path: Path) -> Iterator[Chain]:
    if not os.path.exists(PYTHON) or shutil.which("runuser") is None:
        pytest.skip(f"needs {PYTHON} and runuser")
    if os.geteuid() != 0:
        pytest.skip("runuser needs root")
    fake = tmp_path / "fake_screen.py"
    fake.write_text(FAKE_SCREEN)
    shim = tmp_path / "shim"
    shim.write_text(SHIM)
    shim.chmod(0o755)
    inner = f"bash {shim} {PYTHON} {standin} --datasets B1 --output-dir {host.output_dir}; true"
    home = tmp_path / "home"  # a login shell with no ~/.profile: root's may be slow (pyenv)
    home.mkdir()
    argv = ["SCREEN", str(fake), "-S", "gen", "runuser", "-u", "root", "--"]
    argv += ["env", f"HOME={home}", "bash", "-lc", inner]
    screen = subprocess.Popen(argv, executable=PYTHON, start_new_session=True)
    tree: list[psutil.Process] = []
    try:

        def started() -> bool:
            tree[:] = psutil.Process(screen.pid).children(recursive=True)
            return bool(
                [p for p in tree if cmdline(p)[:2] == [PYTHON, str(standin)]]
                and [p for p in tree if cmdline(p)[-1:] == ["import time; time.sleep(300)"]]
                and (Path(host.output_dir) / "B1" / "argv.json").exists()
            )

        wait_until_sync(started, 20, "the chain's start", detail=lambda: f"tree: {tree}")
        writers = [p for p in tree if cmdline(p)[:2] == [PYTHON, str(standin)]]
        windows = [p for p in tree if cmdline(p)[-1:] == ["import time; time.sleep(300)"]]
        wrappers = [p for p in tree if cmdline(p) and p not in (*writers, *windows)]
        assert len(wrappers) == 3, wrappers  # runuser, bash -lc, bash shim
        yield Chain(screen, writers[0], windows[0], wrappers)
    finally:  # the whole tree, twice: a shell may fork between the look and the kill
        for _ in range(2):
            with contextlib.suppress(psutil.Error):
                tree += psutil.Process(screen.pid).children(recursive=True)
            for process in tree:
                with contextlib.suppress(psutil.Error):
                    process.kill()
        screen.kill()
        screen.wait()


async def test_k_stops_only_the_writer_inside_screen_and_wrappers(
    host: AnyHost, screen_chain: Chain
) -> None:
    chain = screen_chain
    runs = [run for run in (await host.survey()).runs if run.output_dir == host.output_dir]
    # The writer alone is the run: not SCREEN, runuser, bash -lc or the shim.
    assert [run.pid for run in runs] == [chain.writer.pid], [r.identity.command for r in runs]
    outcome = await host.kill(runs[0].identity, grace_s=10)
    assert outcome.result is KillResult.STOPPED, outcome
    assert outcome.files_stable is True, outcome
    assert not alive(chain.writer.pid)
    assert chain.screen.poll() is None, "the SCREEN daemon was signalled"
    assert alive(chain.window.pid), "the other window was stopped with the run"
    assert psutil.Process(chain.screen.pid).status() != psutil.STATUS_STOPPED
    # The wrappers end by themselves once the writer is gone (`; true` ends the bash -lc).
    await wait_until(
        lambda: not any(alive(p.pid) for p in chain.wrappers), 10, "the wrappers' end with the run"
    )
    os.kill(chain.window.pid, signal.SIGKILL)


PARENT_WRITER = r"""
import os, subprocess, sys, time
out, helper = sys.argv[1], sys.argv[2:]
os.makedirs(os.path.join(out, "B1"), exist_ok=True)
fd = os.open(os.path.join(out, "B1", "raw_responses.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
child = subprocess.Popen(helper)
while True:
    os.write(fd, b'{"sample_id": 1, "completion_tokens": 1}\n')
    time.sleep(0.05)
"""


async def test_the_process_holding_the_record_file_is_the_run_not_its_helper(
    tmp_path: Path,
) -> None:
    """A writer whose helper child also names the run: the open file handle decides."""
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "run_inference.py"
    script.write_text(PARENT_WRITER)
    helper = [PYTHON, "-c", "import time; time.sleep(300)", "run_inference.py", "--datasets", "B1"]
    writer = subprocess.Popen([PYTHON, str(script), str(out), *helper])
    try:
        deadline = time.monotonic() + 20
        while len(psutil.Process(writer.pid).children()) < 1 or not (out / "B1").exists():
            assert time.monotonic() < deadline, "the writer never started its helper"
            await asyncio.sleep(0.05)
        helper_pid = psutil.Process(writer.pid).children()[0].pid
        host = LocalHost(out)
        runs = [run for run in (await host.survey()).runs if run.pid in (writer.pid, helper_pid)]
        assert [run.pid for run in runs] == [writer.pid]
    finally:
        for child in psutil.Process(writer.pid).children():
            child.kill()
        writer.kill()
        writer.wait()


@pytest.mark.parametrize(
    "argv",
    [
        ["SCREEN", "-S", "gen", "python", "run_inference.py"],
        ["/usr/bin/screen", "-dmS", "gen", "python", "run_inference.py"],
        ["tmux: server", "python run_inference.py"],
        ["byobu", "new", "python", "run_inference.py"],
        ["runuser", "-u", "bob", "--", "python", "run_inference.py"],
        ["sudo", "-u", "bob", "python", "run_inference.py"],
        ["bash", "-lc", "python run_inference.py --datasets B1"],
        ["sh", "-ec", "python run_inference.py"],
        ["-bash", "-c", "python run_inference.py"],
        ["/bin/bash", "-l", "-c", "python run_inference.py"],
    ],
)
def test_multiplexers_wrappers_and_shell_strings_are_never_runs(argv: list[str]) -> None:
    from gen_tui.backends.watcher import DEFAULT_PATTERN, is_candidate

    assert not is_candidate(argv, re.compile(DEFAULT_PATTERN))


def test_the_run_itself_is_still_a_candidate() -> None:
    from gen_tui.backends.watcher import DEFAULT_PATTERN, is_candidate

    pattern = re.compile(DEFAULT_PATTERN)
    assert is_candidate(["python", "run_inference.py", "--datasets", "B1"], pattern)
    assert is_candidate(["bash", "pyenv-exec", "python", "run_inference.py"], pattern)
