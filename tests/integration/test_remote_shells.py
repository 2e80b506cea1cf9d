"""A GPU box whose login shell is csh or tcsh: every script still runs, over the real sshd.

sshd hands each command line to the login shell (`$SHELL -c LINE`). csh/tcsh end a quoted
word at a newline and expand `!` inside single quotes, so a multi-line `sh -c '...'` script
broke there and `k` could not stop anything. Scripts now go on stdin to `sh -s`, and words
on the command line are quoted for every shell; a value with a newline is refused by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gen_tui.backends.hosts import KillResult, RunError, RunIdentity, SSHHost, StartError
from tests.support.records import record_commands
from tests.support.runs import STANDIN
from tests.support.sshd import Sshd
from tests.support.users import CSH_USER, ensure_user, folder_of, give

PYTHON = "/usr/bin/python3"  # the box's system Python: the test user cannot read root's venv


@pytest.fixture(params=["/usr/bin/tcsh", "/bin/csh"])
async def csh_host(request: pytest.FixtureRequest, users_sshd: Sshd) -> AsyncIterator[SSHHost]:
    shell = request.param
    if not os.path.exists(shell):
        pytest.skip(f"{shell} is not installed (apt-get install -y tcsh csh)")
    if not os.path.exists(PYTHON):
        pytest.skip(f"{PYTHON} is missing")
    user = ensure_user(CSH_USER, shell)
    with folder_of(user, "gen-tui-csh-") as folder:
        (folder / "out").mkdir()
        out = give(folder / "out", user)
        host = SSHHost(
            "csh-box",
            f"{CSH_USER}@127.0.0.1:{users_sshd.port}",
            str(out),
            options=users_sshd.options(),
            python=PYTHON,
        )
        await host.connect()
        try:
            yield host
        finally:
            await host.close()


async def test_kill_sizes_and_start_scripts_work_under_a_csh_login_shell(
    csh_host: SSHHost,
) -> None:
    out = Path(csh_host.output_dir)
    script = out.parent / "run_inference.py"
    script.write_text(STANDIN)
    os.chown(script, out.stat().st_uid, out.stat().st_gid)
    # `!` and quotes in a word: csh expands history inside single quotes.
    argv = [PYTHON, str(script), "--datasets", "B1", "--output-dir", str(out), "--note", "hi! it's"]
    identity = await csh_host.start(argv, str(out.parent / "logs" / "B1.log"))
    try:
        assert identity.cmdline == tuple(argv)
        await _stop_under_csh(csh_host, identity, out)
    finally:  # a failed test leaves nothing running
        with contextlib.suppress(ProcessLookupError):
            os.kill(identity.pid, signal.SIGKILL)
    # A start that dies at once is reported with the end of its log (the `tail` script).
    with pytest.raises(StartError, match="boom!"):
        await csh_host.start(
            [PYTHON, "-c", "import sys; print('boom!', flush=True); sys.exit(3)"],
            str(out.parent / "logs" / "boom.log"),
        )


async def _stop_under_csh(csh_host: SSHHost, identity: RunIdentity, out: Path) -> None:
    """Wait for the run's records, find it listed, then stop it: the signal script and the
    file-size sampler, both multi-line sh scripts."""
    records = out / "B1" / "raw_responses.jsonl"
    deadline = time.monotonic() + 20
    while not (records.exists() and records.stat().st_size > 0):
        assert time.monotonic() < deadline, "the run never wrote"
        await asyncio.sleep(0.05)
    runs = [run for run in (await csh_host.survey()).runs if run.pid == identity.pid]
    assert [run.datasets for run in runs] == [("B1",)]
    outcome = await csh_host.kill(identity, grace_s=5, files=[str(records)])
    assert outcome.result is KillResult.STOPPED, outcome
    assert outcome.files_stable is True, outcome
    assert outcome.sizes == {str(records): records.stat().st_size}


async def test_a_value_with_a_newline_is_refused_by_name_and_nothing_runs(
    csh_host: SSHHost,
) -> None:
    calls = record_commands(csh_host.connection)
    good = csh_host.output_dir
    bad = good + "/x\ntouch /tmp/PWNED-csh"
    csh_host.output_dir = bad
    with pytest.raises(RunError, match=r"x\\ntouch /tmp/PWNED-csh.*line break") as caught:
        await csh_host.survey()
    assert "\n" not in str(caught.value)
    with pytest.raises(RunError, match="line break"):
        csh_host.watch(bad, ["B1"])
    with pytest.raises(RunError, match=r"the remote python 'py\\x00'"):
        csh_host.output_dir, csh_host.python = good, "py\0"
        await csh_host.survey()
    with pytest.raises(RunError, match="out\ufffd holds bytes that are not UTF-8"):
        csh_host.python = "python3"
        csh_host.output_dir = good + "/out\udcc3"  # as a process's argv decodes b"\xc3"
        await csh_host.survey()
    assert calls == [], "a command line with a newline reached the host"
    assert not os.path.exists("/tmp/PWNED-csh")
