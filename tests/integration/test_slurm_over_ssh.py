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
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.hosts.connection import SSHConnection
from gen_tui.backends.hosts.ssh import SSHHost
from gen_tui.backends.servers.slurm import BatchSpec, SlurmJobs
from gen_tui.backends.servers.slurm_launcher import SlurmLauncher, ssh_runner
from gen_tui.backends.servers.state import StateFile
from tests.support.slurm import Cluster, cancel_jobs, wait_for_job
from tests.support.sshd import Sshd
from tests.support.users import ensure_user, folder_of

SLURM_USER = "gentui-slurm"
"""A login of these tests alone (another test module switches its own user's shell)."""

TAG = f"-{os.getpid()}"
"""The end of this process's job names: a second suite on the machine (the same login, the
same one-node Slurm) has jobs of its own, which this one neither lists nor cancels (the
teardown cancelled every gen-tui job of the login, and a second suite's sleeper ended
CANCELLED before it ran)."""


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
        jobs = SlurmJobs(ssh_runner(connection, "login", timeout=30))
        try:
            yield jobs, folder
        finally:
            for job in (await jobs.ours()).jobs:
                if job.recipe.endswith(TAG):
                    await jobs.cancel(job.job_id)
            await connection.close()


async def test_words_come_through_the_login_shell_and_the_jobs_sh(
    login: tuple[SlurmJobs, Path],
) -> None:
    jobs, folder = login
    words = ["a!b", "!1", "it's", '"q"', "$HOME", "`id`", "$(id)", "a  b", "*", "%j", "\\n"]
    spec = BatchSpec(
        name=f"over-ssh{TAG}",
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
    spec = BatchSpec(name=f"sleeper{TAG}", argv=["sleep", "300"], log=str(folder / "s.log"))
    job_id = await jobs.submit(spec)
    running = await wait_for_job(jobs, job_id, lambda s: s.running, "running")
    listed = [j for j in (await jobs.ours()).jobs if j.recipe.endswith(TAG)]
    assert [(j.job_id, j.recipe) for j in listed] == [(job_id, f"sleeper{TAG}")]
    await jobs.cancel(job_id)
    ended = await wait_for_job(jobs, job_id, lambda s: s.ended, "ended")
    assert (ended.state, ended.node) == ("CANCELLED", running.node)


async def test_the_launcher_on_a_login_node_a_dropped_link_is_no_exit(
    users_sshd: Sshd, slurm: Cluster, tmp_path: Path
) -> None:
    if not os.path.exists("/usr/bin/tcsh"):
        pytest.skip("/usr/bin/tcsh is not installed (apt-get install -y tcsh)")
    user = ensure_user(SLURM_USER, "/usr/bin/tcsh")
    home = Path(user.pw_dir)  # made without one (useradd -M): the logs' folder is in it
    home.mkdir(mode=0o755, exist_ok=True)
    os.chown(home, user.pw_uid, user.pw_gid)
    name = f"ssh-{os.getpid()}"
    recipe = ServerRecipe(
        name, ("sh", "-c", "echo ready; exec sleep 300"), 1, host="login", launcher="slurm"
    )
    target = f"{SLURM_USER}@127.0.0.1:{users_sshd.port}"

    def launcher() -> SlurmLauncher:
        host = SSHHost("login", target, ".", options=users_sshd.options())
        return SlurmLauncher({"login": host}, "/unused", StateFile(tmp_path), [recipe])

    first = launcher()
    launched = await first.start(recipe)
    try:
        assert (launched.node, launched.host) == (slurm.node, "login")
        assert launched.log == f"{user.pw_dir}/.local/state/gen-tui/servers/{name}.log"
        assert await first.exit_of(launched) is None
        await first.hosts["login"].close()  # the link drops: asked again later, not an exit
        assert await first.exit_of(launched) is None

        second = launcher()  # the next gen-tui, over a new link: the same job id
        (adopted,) = [found for found in await second.adopt() if found.name == name]
        assert (adopted.ref, adopted.node) == (launched.ref, slurm.node)
        said = await second.stop(adopted, 2.0)
        assert said.startswith(f"job {launched.ref} stopped"), said
        ended = await second.exit_of(adopted)
        assert ended is not None and ended.reason.startswith(f"job {launched.ref} ended ")
        lines = Path(launched.log).read_text().splitlines()  # read over SSH by the launcher
        assert lines[0] == "ready" and ended.reason.endswith(f"its log's last line: {lines[-1]}")
        await second.hosts["login"].close()
    finally:
        cancel_jobs(name)
