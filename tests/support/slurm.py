"""The real single-node Slurm that `.ci/slurm-up` starts on this machine, for the tests.

gen-tui does not need Slurm: where it is not installed or its daemons are not up, the tests
that submit jobs are skipped, saying which part is missing and that `.ci/slurm-up` starts it.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from gen_tui.backends.servers.slurm import JOB_PREFIX, JobStatus, SlurmJobs

START = "run .ci/slurm-up (as root) to install and start it"
JOB_START_S = 60.0
"""How long a submitted job may take to run, or a cancelled one to end (a second here)."""


@dataclass(frozen=True)
class Cluster:
    """The partition jobs go to (the default one), its node, and why sacct cannot answer
    (None: the cluster keeps accounting, through slurmdbd)."""

    partition: str
    node: str
    no_accounting: str | None


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def slurm_cluster() -> Cluster | str:
    """The cluster, or why there is none to submit to (a line for pytest.skip)."""
    missing = [
        cmd for cmd in ("sbatch", "squeue", "scancel", "scontrol", "sinfo") if not shutil.which(cmd)
    ]
    if missing:
        return f"Slurm is not installed here ({', '.join(missing)} missing): {START}"
    try:
        ping = _run("scontrol", "ping")
        if "is UP" not in ping.stdout:
            said = [line for line in (ping.stdout + ping.stderr).splitlines() if line.strip("* ")]
            return f"slurmctld does not answer (scontrol ping: {(said or ['nothing'])[0]}): {START}"
        info = _run("sinfo", "-h", "-N", "-o", "%P %N %T")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Slurm's commands do not run here ({exc}): {START}"
    for line in info.stdout.splitlines():
        partition, node, state = [*line.split(), "", "", ""][:3]
        if partition.endswith("*") and state.startswith(("idle", "mixed", "allocated")):
            return Cluster(partition.rstrip("*"), node, _no_accounting())
    return f"no node of the default partition takes jobs (sinfo: {info.stdout.strip()!r}): {START}"


def _no_accounting() -> str | None:
    try:
        sacct = _run("sacct", "-n", "-X", "-S", "now", "-E", "now")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sacct does not run here ({exc}): {START}"
    if sacct.returncode != 0:
        said = (sacct.stderr + sacct.stdout).strip().splitlines() or ["no message"]
        return f"this Slurm keeps no accounting (sacct: {said[-1]}): {START}"
    return None


async def wait_for_job(
    jobs: SlurmJobs,
    job_id: str,
    check: Callable[[JobStatus], bool],
    what: str,
    timeout: float = JOB_START_S,
) -> JobStatus:
    """Poll the job's status until `check` holds; AssertionError naming `what` and the
    last status after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        status = await jobs.status(job_id)
        if status is not None and check(status):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} not {what} within {timeout:g} s: {status}")
        await asyncio.sleep(0.2)


def cancel_jobs(prefix: str) -> list[str]:
    """scancel every job of this user whose recipe name (after gen-tui's marker) starts
    with `prefix`: a test's own, never another test's on the same cluster. Their ids."""
    listing = _run("squeue", "-h", "--me", "-o", "%i|%j")
    ids = [
        job_id
        for job_id, _, name in (line.partition("|") for line in listing.stdout.splitlines())
        if name.startswith(JOB_PREFIX + prefix)
    ]
    if ids:
        _run("scancel", *ids)
    return ids


def job_state(job_id: str) -> str:
    """squeue's word for the job now ("" once squeue no longer shows it)."""
    return _run("squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T").stdout.strip()
