"""Who writes a dataset: the holder of its run.lock, or, for lock-less scripts, ours or the
folder owner's process with its record file open for writing (issue 30, point 5).

The attack, as reproduced on main: another user's `sleep` whose command line says
`run_inference.py --datasets D1 --output-dir OURS` blocked `r` on D1 for good ("pid N still
writes it: press k first") and was offered to `k`. A command line is anyone's to write, so
it never makes a writer; nor does another user's process that holds our record file open for
writing. Real processes of a real second account, locally and over the sshd.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gen_tui.backends.hosts import KillResult
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.store.records import RAW_FILE
from tests.support.polling import wait_until
from tests.support.runs import AnyHost, alive
from tests.support.users import OTHER_USER, ensure_user


@contextlib.contextmanager
def theirs(out: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Two processes of the other user naming our D1: a `sleep` (perl's), and one holding
    our record file open for writing (handed the fd, as if they had opened it)."""
    other = ensure_user(OTHER_USER)
    names = ["run_inference.py", "--datasets", "D1", "--output-dir", str(out)]
    fd = os.open(out / "D1" / RAW_FILE, os.O_WRONLY | os.O_APPEND)
    try:
        procs = [
            subprocess.Popen(
                ["perl", "-e", "sleep 120", *names],
                user=other.pw_uid, group=other.pw_gid, cwd="/", text=True,
            ),
            subprocess.Popen(
                ["perl", "-e", "sleep 120", *names],
                user=other.pw_uid, group=other.pw_gid, cwd="/", text=True, pass_fds=(fd,),
            ),
        ]  # fmt: skip
    finally:
        os.close(fd)
    try:
        yield procs
    finally:
        for process in procs:
            process.kill()
            process.wait()


@pytest.mark.timeout(120)
async def test_another_users_command_line_naming_our_dataset_is_no_writer(
    host: AnyHost, standin: Path
) -> None:
    out = Path(host.output_dir)
    (out / "D1").mkdir()
    (out / "D1" / RAW_FILE).write_bytes(b'{"sample_id":1,"completion_tokens":5}\n')
    host.template = [sys.executable, str(standin), "--output-dir", str(out)]
    monitor = HostMonitor(host, survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    try:
        with theirs(out) as procs:
            pids = {process.pid for process in procs}
            await wait_until(
                lambda: pids <= {run.pid for run in monitor.runs} and "D1" in monitor.totals,
                30,
                "their processes listed",
            )
            listed = [run for run in monitor.runs if run.pid in pids]
            assert all(run.datasets == ("D1",) and run.writing == () for run in listed), listed
            # Neither blocks r (the panel's "pid N still writes it") nor is offered to k.
            assert monitor.writer("D1") is None
            resumed = await monitor.resume("D1", 1000)
            try:
                await wait_until(
                    lambda: (w := monitor.writer("D1")) is not None and w.pid == resumed.pid,
                    20,
                    "our resumed run is D1's writer",
                )
                assert monitor.writer("D1").writing == ("D1",)  # type: ignore[union-attr]
            finally:
                outcome = await monitor.kill(resumed, grace_s=5)
            assert outcome.result is KillResult.STOPPED
            assert all(process.poll() is None for process in procs), "theirs was stopped"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await monitor.close()
    assert not alive(resumed.pid)
