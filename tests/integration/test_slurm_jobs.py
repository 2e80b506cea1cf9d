"""Servers as jobs of a real Slurm (issue 32): submitted with sbatch, found on their node,
cancelled and submitted again, through gen-tui's command layer (backends/servers/slurm.py).

The cluster is the one-node Slurm that `.ci/slurm-up` starts on this machine (munged,
slurmctld, slurmd, and slurmdbd over MariaDB for sacct); the server is the simulator as a
command (`gen-tui sim --port P`), standing in for SGLang where a GPU is the point. Skipped,
saying why, where Slurm is not up (the sacct test alone where it keeps no accounting).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from gen_tui.backends.servers.slurm import (
    BatchSpec,
    JobStatus,
    SlurmError,
    SlurmJobs,
    local_runner,
)
from tests.support.ports import free_port
from tests.support.slurm import Cluster, wait_for_job

GEN_TUI = str(Path(sys.executable).with_name("gen-tui"))


@pytest.fixture
async def jobs(slurm: Cluster) -> AsyncIterator[SlurmJobs]:
    """The command layer on this machine; every job a test submitted is cancelled after it."""
    run = local_runner()
    submitted: list[str] = []

    class Tracked(SlurmJobs):
        async def submit(self, spec: BatchSpec) -> str:
            job_id = await super().submit(spec)
            submitted.append(job_id)
            return job_id

    yield Tracked(run)
    for job_id in submitted:
        await SlurmJobs(run).cancel(job_id)


def sim_spec(tmp_path: Path, port: int, name: str = "sim-a", **overrides: object) -> BatchSpec:
    options: dict[str, object] = {
        "name": name,
        "argv": [GEN_TUI, "sim", "--port", str(port), "--slots", "4"],
        "log": str(tmp_path / f"{name}.log"),
        "workdir": str(tmp_path),
    }
    options.update(overrides)
    return BatchSpec(**options)  # type: ignore[arg-type]


async def wait_for_line(log: Path, text: str) -> None:
    """Poll the job's log until it holds `text` (the job's command has got that far)."""
    deadline = time.monotonic() + 30
    while text not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, f"{log} never said {text!r}"
        await asyncio.sleep(0.1)


async def health(node: str, port: int) -> int | str:
    """/health's status code, or the error that stood for one."""
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"http://{node}:{port}/health", timeout=aiohttp.ClientTimeout(total=5)
            ) as r,
        ):
            return r.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"


async def wait_health(node: str, port: int, want_up: bool, log: Path) -> None:
    """Poll /health until it answers 200 (`want_up`) or stops answering; else fail with the
    job's log."""
    deadline = time.monotonic() + 60
    while True:
        answer = await health(node, port)
        if (answer == 200) == want_up:
            return
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
            raise AssertionError(
                f"/health on {node}:{port} still {answer!r} after 60 s; the job's log:\n{tail}"
            )
        await asyncio.sleep(0.2)


@pytest.mark.quick
async def test_a_server_job_runs_is_listed_cancelled_and_submitted_again(
    jobs: SlurmJobs, slurm: Cluster, tmp_path: Path
) -> None:
    port = free_port()
    spec = sim_spec(tmp_path, port, partition=slurm.partition)
    log = Path(spec.log)

    first = await jobs.submit(spec)
    running = await wait_for_job(jobs, first, lambda s: s.running, "running")
    assert running.node == slurm.node
    await wait_health(running.node, port, want_up=True, log=log)

    listing = await jobs.ours()
    assert listing.odd is None
    assert [(j.job_id, j.recipe, j.state) for j in listing.jobs if j.job_id == first] == [
        (first, "sim-a", "RUNNING")
    ]

    await jobs.cancel(first)
    ended = await wait_for_job(jobs, first, lambda s: s.ended, "ended")
    # scancel's SIGTERM reaches the server itself (the job's command is exec'd), and the
    # simulator ends cleanly on it: status 0, no signal.
    assert (ended.state, ended.exit_code, ended.signal) == ("CANCELLED", 0, 0), ended
    await wait_health(running.node, port, want_up=False, log=log)
    assert first not in [j.job_id for j in (await jobs.ours()).jobs]

    second = await jobs.submit(spec)
    assert second != first
    again = await wait_for_job(jobs, second, lambda s: s.running, "running")
    assert again.node is not None
    await wait_health(again.node, port, want_up=True, log=log)


async def test_a_server_that_exits_reports_its_exit_code(
    jobs: SlurmJobs, slurm: Cluster, tmp_path: Path
) -> None:
    # The simulator refuses a bad flag with one line and status 2: the job fails with it.
    spec = sim_spec(tmp_path, free_port(), name="bad-flag", argv=[GEN_TUI, "sim", "--slots", "0"])
    job_id = await jobs.submit(spec)
    ended = await wait_for_job(jobs, job_id, lambda s: s.ended, "ended")
    assert (ended.state, ended.exit_code, ended.signal) == ("FAILED", 2, 0), ended
    assert "--slots" in Path(spec.log).read_text()


async def test_a_signal_reaches_the_server_and_it_ends_its_own_way(
    jobs: SlurmJobs, slurm: Cluster, tmp_path: Path
) -> None:
    # The stop with a grace period: TERM first (the server drains), scancel after.
    script = "trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.1; done"
    spec = sim_spec(tmp_path, 0, name="drains", argv=["sh", "-c", script])
    log = Path(spec.log)
    job_id = await jobs.submit(spec)
    await wait_for_job(jobs, job_id, lambda s: s.running, "running")
    await wait_for_line(log, "ready")
    await jobs.cancel(job_id, signal="TERM")
    ended = await wait_for_job(jobs, job_id, lambda s: s.ended, "ended")
    assert (ended.state, ended.exit_code, ended.signal) == ("FAILED", 7, 0), ended
    assert "got TERM" in log.read_text()


async def test_the_accounting_knows_how_a_job_ended(
    jobs: SlurmJobs, slurm: Cluster, tmp_path: Path
) -> None:
    # What status() reads once the controller has forgotten the job (MinJobAge, minutes):
    # sacct, with the job's line and its batch step's, as this Slurm writes them.
    if slurm.no_accounting:
        pytest.skip(slurm.no_accounting)
    spec = sim_spec(tmp_path, 0, name="acct", argv=["sh", "-c", "echo ready; exec sleep 60"])
    job_id = await jobs.submit(spec)
    await wait_for_job(jobs, job_id, lambda s: s.running, "running")
    # Cancelled once the command runs: one cancelled while its step still starts has been
    # seen to end as FAILED with status 15 instead (not what this test is about).
    await wait_for_line(Path(spec.log), "ready")
    await jobs.cancel(job_id)
    deadline = time.monotonic() + 30
    while (accounted := await jobs.accounted(job_id)) is None or accounted.signal != 15:
        assert time.monotonic() < deadline, f"sacct never said job {job_id} ended: {accounted}"
        await asyncio.sleep(0.2)
    assert accounted == JobStatus(
        job_id, "CANCELLED", slurm.node, exit_code=0, signal=15, source="sacct"
    )


async def test_hostile_words_reach_the_server_as_they_were(
    jobs: SlurmJobs, slurm: Cluster, tmp_path: Path
) -> None:
    # Each word is quoted for the node's /bin/sh: nothing in them is run or expanded, and
    # sbatch's own %j in a word is not replaced (only --output's is).
    canary = tmp_path / "ran"
    words = [f"$(touch {canary})", f"`touch {canary}`", "it's; touch x", "a  b", "*", "~", "%j"]
    value = "$HOME 'x' \"y\" !1"
    spec = BatchSpec(
        name="quoting",
        argv=["sh", "-c", 'printf "%s\\n" "$GEN_TUI_TEST" "$@"', "sh", *words],
        env={"GEN_TUI_TEST": value},
        log=str(tmp_path / "quoting.log"),
        workdir=str(tmp_path),
    )
    job_id = await jobs.submit(spec)
    ended = await wait_for_job(jobs, job_id, lambda s: s.ended, "ended")
    assert (ended.state, ended.exit_code) == ("COMPLETED", 0), ended
    assert Path(spec.log).read_text().splitlines() == [value, *words]
    assert not canary.exists()
    assert not (tmp_path / "x").exists()


async def test_a_job_slurm_never_had_is_none(jobs: SlurmJobs) -> None:
    # squeue and scontrol answer "Invalid job id specified", sacct (where it runs) nothing.
    assert await jobs.status("999999999") is None


async def test_a_partition_that_does_not_exist_is_one_line(
    jobs: SlurmJobs, slurm: Cluster, tmp_path: Path
) -> None:
    spec = sim_spec(tmp_path, free_port(), name="gpu-big", partition="no-such-partition")
    with pytest.raises(SlurmError) as caught:
        await jobs.submit(spec)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("server gpu-big: sbatch refused the job on partition no-such")
    assert "invalid partition" in message.lower()  # Slurm's own words


async def test_gpus_the_cluster_has_not_are_one_line(
    jobs: SlurmJobs, slurm: Cluster, tmp_path: Path
) -> None:
    spec = sim_spec(tmp_path, free_port(), name="tp8", gpus=8)
    with pytest.raises(SlurmError) as caught:
        await jobs.submit(spec)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("server tp8: sbatch refused the job on the default partition")
    assert "gres" in message.lower()


async def test_no_sbatch_is_one_line(tmp_path: Path) -> None:
    # No Slurm needed: a login node without it answers as this PATH does.
    jobs = SlurmJobs(local_runner(env={"PATH": str(tmp_path)}))
    with pytest.raises(SlurmError) as caught:
        await jobs.submit(sim_spec(tmp_path, 1, name="sim-a"))
    assert str(caught.value) == (
        "server sim-a: sbatch is not installed (or not on PATH) where it was run: "
        "sbatch: command not found"
    )
