"""Slurm from a login node over SSH, whose login shell is csh or tcsh (issue 32).

On a cluster gen-tui runs sbatch on the login node over SSH: sshd hands the command line to
the user's login shell, and the job's `/bin/sh` then parses the server's command a second
time. Each word of a recipe must come through both as it was: a `!` (csh expands history
even inside single quotes), quotes, `$`, backquotes. Here the real sshd on loopback, a Unix
user whose shell is tcsh or csh, and the real one-node Slurm of `.ci/slurm-up`; the runner
quotes each argv word for every shell, as the hosts' commands do (`remote_quote`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from gen_tui.backends.hosts.connection import SSHConnection
from gen_tui.backends.hosts.scripts import remote_quote
from gen_tui.backends.servers.slurm import BatchSpec, SlurmJobs
from tests.support.slurm import Cluster, wait_for_job
from tests.support.sshd import Sshd
from tests.support.users import ensure_user, folder_of

SLURM_USER = "gentui-slurm"
"""A login of these tests alone (another test module switches its own user's shell)."""


@pytest.fixture(params=["/usr/bin/tcsh", "/bin/csh"])
async def login(
    request: pytest.FixtureRequest, users_sshd: Sshd, slurm: Cluster
) -> AsyncIterator[tuple[SlurmJobs, Path]]:
    """The command layer on the login node over SSH, and a folder of the user's."""
    shell = request.param
    if not os.path.exists(shell):
        pytest.skip(f"{shell} is not installed (apt-get install -y tcsh csh)")
    user = ensure_user(SLURM_USER, shell)
    with folder_of(user, "gen-tui-slurm-") as folder:
        connection = SSHConnection(
            f"{SLURM_USER}@127.0.0.1:{users_sshd.port}", users_sshd.options()
        )
        await connection.start()

        async def run(argv: Sequence[str]) -> tuple[int, str, str]:
            line = " ".join(remote_quote(word, "a word") for word in argv)
            result = await connection.run(line, timeout=30)
            return int(result.exit_status or 0), str(result.stdout), str(result.stderr)

        jobs = SlurmJobs(run)
        try:
            yield jobs, folder
        finally:
            for job in (await jobs.ours()).jobs:
                await jobs.cancel(job.job_id)
            await connection.close()


async def test_words_come_through_the_login_shell_and_the_jobs_sh(
    login: tuple[SlurmJobs, Path],
) -> None:
    jobs, folder = login
    words = ["a!b", "!1", "it's", '"q"', "$HOME", "`id`", "$(id)", "a  b", "*", "%j", "\\n"]
    spec = BatchSpec(
        name="over-ssh",
        argv=["sh", "-c", 'printf "%s\\n" "$GEN_TUI_TEST" "$@"', "sh", *words],
        env={"GEN_TUI_TEST": "x!y $USER"},
        log=str(folder / "over-ssh.log"),
        workdir=str(folder),
    )
    job_id = await jobs.submit(spec)
    ended = await wait_for_job(jobs, job_id, lambda s: s.ended, "ended")
    assert (ended.state, ended.exit_code) == ("COMPLETED", 0), ended
    assert Path(spec.log).read_text().splitlines() == ["x!y $USER", *words]


async def test_our_jobs_are_listed_and_cancelled_over_ssh(
    login: tuple[SlurmJobs, Path],
) -> None:
    jobs, folder = login
    spec = BatchSpec(name="sleeper", argv=["sleep", "300"], log=str(folder / "s.log"))
    job_id = await jobs.submit(spec)
    running = await wait_for_job(jobs, job_id, lambda s: s.running, "running")
    listed = (await jobs.ours()).jobs
    assert [(j.job_id, j.recipe) for j in listed] == [(job_id, "sleeper")]
    await jobs.cancel(job_id)
    ended = await wait_for_job(jobs, job_id, lambda s: s.ended, "ended")
    assert (ended.state, ended.node) == ("CANCELLED", running.node)
