"""A shared GPU box: another user's runs and files are listed, never stopped or run as us.

The attack: a second Unix user starts a process whose command line matches the run pattern
(or plants a `run.lock` naming a command line in our output folder), and waits for the
gen-tui user, root here, to press `r` on it (which would run that user's program with
root's rights and environment) or `k` (which would stop someone else's work). Real
processes of a real second account, on this machine and over the real sshd.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gen_tui.backends.hosts import KillResult, LocalHost, RunError, RunProcess, SSHHost
from gen_tui.backends.watcher import LOCK_FILE
from tests.support.polling import wait_until
from tests.support.users import OTHER_USER, ensure_user

AnyHost = LocalHost | SSHHost
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def only_as_root(marker: Path) -> str:
    """A program that writes `marker` when it runs as root, and otherwise sleeps."""
    return f"import os, time\nif os.getuid() == 0: open({str(marker)!r}, 'w')\ntime.sleep(60)\n"


@pytest.fixture
def others_run(host: AnyHost, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A process of the other user that names dataset B1 of our output folder."""
    user = ensure_user(OTHER_USER)
    marker = tmp_path / "PWNED-ran-as-root"
    argv = [PYTHON, "-c", only_as_root(marker), "run_inference.py"]
    argv += ["--datasets", "B1", "--output-dir", host.output_dir]
    process = subprocess.Popen(argv, user=user.pw_uid, group=user.pw_gid, cwd="/")
    try:
        yield process, marker
    finally:
        process.kill()
        process.wait()


async def listed_run(host: AnyHost, pid: int) -> RunProcess:
    deadline = time.monotonic() + 20
    while True:
        found = [run for run in (await host.survey()).runs if run.pid == pid]
        if found and found[0].identity.cmdline[:1] == (PYTHON,):
            return found[0]
        assert time.monotonic() < deadline, f"pid {pid} never listed"
        await asyncio.sleep(0.1)


async def test_another_users_run_is_never_stopped_or_run_again(
    host: AnyHost, others_run: tuple[subprocess.Popen[bytes], Path]
) -> None:
    process, marker = others_run
    other = ensure_user(OTHER_USER)
    run = await listed_run(host, process.pid)
    assert (run.uid, run.user, run.mine) == (other.pw_uid, OTHER_USER, False)
    owner = f"pid {process.pid} belongs to {OTHER_USER} (uid {other.pw_uid})"

    # k: refused up front with its owner, and the process is untouched.
    outcome = await host.kill(run.identity, grace_s=2)
    assert outcome.result is KillResult.NOT_YOURS, outcome
    assert outcome.detail == f"{owner}: gen-tui never stops another user's run"
    # The signal script refuses too, for a kill that does not go through the run list.
    host._runs.clear()
    outcome = await host.kill(run.identity, grace_s=2)
    assert outcome.result is KillResult.NOT_YOURS, outcome
    assert f"belongs to uid {other.pw_uid}" in outcome.detail
    assert process.poll() is None and psutil.Process(process.pid).status() != "stopped"

    # r, once it ended: its command line is never run as us.
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with pytest.raises(RunError) as caught:
        await host.resume(run, 1000)
    assert str(caught.value) == f"{owner}: gen-tui never runs another user's command line"
    # The dataset route: their command line only named B1, so it is no writer of B1 and
    # never what `r` on B1 runs (issue 30, point 5); nothing here says what to run.
    with pytest.raises(RunError, match="B1: no command line to resume it with"):
        await host.resume("B1", 1000)
    await asyncio.sleep(0.5)
    assert not marker.exists(), "the other user's command line ran as root"


@pytest.mark.parametrize("planted", ["other user's", "group-writable", "in another's folder"])
async def test_a_planted_run_lock_command_line_is_never_run(
    host: AnyHost, tmp_path: Path, planted: str
) -> None:
    other = ensure_user(OTHER_USER)
    marker = tmp_path / "PWNED-lock"
    folder = Path(host.output_dir) / "B1"
    folder.mkdir()
    lock = folder / LOCK_FILE
    argv = [PYTHON, "-c", only_as_root(marker)]
    lock.write_text(json.dumps({"argv": argv, "cwd": "/", "pid": 1}))
    lock.chmod(0o644)
    if planted == "other user's":
        os.chown(lock, other.pw_uid, other.pw_gid)
        why = f"it belongs to {OTHER_USER} (uid {other.pw_uid})"
    elif planted == "group-writable":
        lock.chmod(0o664)
        why = "group or others may write it (mode 0664)"
    else:
        os.chown(folder, other.pw_uid, other.pw_gid)
        why = f"its folder belongs to {OTHER_USER} (uid {other.pw_uid})"
    with pytest.raises(RunError) as caught:
        await host.resume("B1", 1000)
    assert str(caught.value) == (
        f"B1: its run.lock names a command line, but {why}: gen-tui never runs a command "
        "line from a file another user may have written"
    )
    await asyncio.sleep(0.5)
    assert not marker.exists(), "a planted command line ran"


async def test_our_own_run_lock_command_line_still_resumes(host: AnyHost, tmp_path: Path) -> None:
    """The check refuses what others may have written, not what we wrote ourselves."""
    folder = Path(host.output_dir) / "B1"
    folder.mkdir()
    out = tmp_path / "resumed"
    argv = [PYTHON, "-c", f"open({str(out)!r}, 'w'); import time; time.sleep(60)"]
    (folder / LOCK_FILE).write_text(json.dumps({"argv": argv, "cwd": "/", "pid": 1}))
    (folder / LOCK_FILE).chmod(0o644)
    identity = await host.resume("B1", 1000)
    try:
        assert identity.cmdline[:3] == tuple(argv)
        await wait_until(out.exists, 20, "the resumed command's marker file")
    finally:  # the stop is checked after, where a failure cannot hide the test's own
        outcome = await host.kill(identity, grace_s=2)
    assert outcome.result is KillResult.STOPPED


async def test_the_resume_preview_is_the_command_that_runs_and_never_another_users(
    host: AnyHost, others_run: tuple[subprocess.Popen[bytes], Path], tmp_path: Path
) -> None:
    """The panel's resume dialog shows what `resume` would run: our run's command with the
    budget set, in its folder; for a dataset another user was seen writing, no command of
    theirs (only the words for a lock file's, which the host checks at the resume)."""
    process, _ = others_run
    await listed_run(host, process.pid)
    command, cwd = host.resume_preview("B1")
    assert (command, cwd) == (None, None)
    argv = [PYTHON, "-c", "import time; time.sleep(60)", "run_inference.py"]
    argv += ["--datasets", "B2", "--output-dir", host.output_dir]
    ours = subprocess.Popen(argv, cwd=tmp_path)
    try:
        await listed_run(host, ours.pid)
        command, cwd = host.resume_preview("B2", max_samples=7)
        assert command is not None and cwd == str(tmp_path)
        assert command(5000) == [*argv, "--max-tokens-per-dataset", "5000", "--max-samples", "7"]
    finally:
        ours.kill()
        ours.wait()
