"""The story of issue 32 through a real Slurm: `gen-tui servers up` submits two `gen-tui sim`
recipes (`launcher = "slurm"`) as batch jobs; a `gen-tui run` sends to both on their node;
`scancel` of one job stands in for the crash: the supervisor sees the job ended, submits it
again, and it is healthy again; the run ends at its budget with nothing lost and nothing
duplicated. Ctrl-C leaves the jobs queued, the next `up` adopts the same job ids, `stop`
ends them. A partition that does not exist is one line naming the recipe and Slurm's own
words, and no restart loop.

The cluster is the one-node Slurm of `.ci/slurm-up` (skipped, saying why, when it is not
up); sbatch, squeue, scontrol, sacct and scancel run here, this machine as the login node.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.records import progress, recount
from tests.support.runs import GEN_TUI, finish, run_args
from tests.support.servers import Lines, gen_tui_in, kill_servers
from tests.support.slurm import Cluster, cancel_jobs, job_state

BUDGET = 40_000


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"
    kill_servers(tmp_path / "state" / "gen-tui" / "servers")


def _config(
    path: Path, names: list[str], ports: list[int], vocab: int, partition: str, *flags: str
) -> Path:
    text = ""
    for name, port in zip(names, ports, strict=True):
        argv = [*GEN_TUI, "sim", "--port", str(port), "--vocab-size", str(vocab), *flags]
        words = ", ".join(f'"{word}"' for word in argv)
        text += (
            f'[[servers]]\nname = "{name}"\nargv = [{words}]\nport = {port}\n'
            'launcher = "slurm"\nstartup_s = 60\nunhealthy_s = 5\nbackoff_s = 0.2\n'
            f'max_restarts_per_hour = 3\nenv = {{ PYTHONUNBUFFERED = "1" }}\n'
            f'[servers.slurm]\npartition = "{partition}"\ntime = "30"\n'
        )
    path.write_text(text)
    return path


def _job(line: str) -> str:
    found = re.search(r"job (\d+)", line)
    assert found, line
    return found.group(1)


async def test_the_story_through_slurm(
    slurm: Cluster,
    prefix: str,
    state: Path,
    tmp_path: Path,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    vocab_size: int,
) -> None:
    a, b = f"{prefix}a", f"{prefix}b"
    ports = [free_port(), free_port()]
    config = _config(
        tmp_path / "gen-tui.toml", [a, b], ports, vocab_size, slurm.partition,
        "--tokens-per-s", "400",
    )  # fmt: skip
    up = Lines(await gen_tui_in(state, "servers", "--config", str(config), "up"))
    first = {
        name: _job(await up.wait(f"server {name} loading", "on " + slurm.node)) for name in (a, b)
    }
    for name in (a, b):
        await up.wait(f"server {name} healthy", timeout=90)
    assert all(job_state(job) == "RUNNING" for job in first.values())

    # The run names the recipes (no `address`): it is sent to the node each job runs on,
    # as the state file of `servers up` (the same XDG_STATE_HOME) says it.
    args = run_args(tokenizer_dir, prompts_dir(A=400), tmp_path / "out", a)
    run = await gen_tui_in(
        state, *args, "--server-url", b, "--config", str(config),
        "--max-tokens-per-dataset", str(BUDGET), "--max-new-tokens", "400", "--concurrency", "8",
    )  # fmt: skip
    raw = tmp_path / "out" / "A" / "raw_responses.jsonl"
    while not raw.exists():
        assert run.returncode is None, await finish(run)
        await asyncio.sleep(0.1)

    # The crash: the job is cancelled under the supervisor's feet.
    subprocess.run(["scancel", first[a]], check=True, timeout=30)
    exited = await up.wait(f"server {a} exited", f"job {first[a]} ended CANCELLED")
    assert "its log's last line" in exited
    await up.wait(f"server {a} restarting")
    second = _job(await up.wait(f"server {a} loading", count=2, timeout=90))
    await up.wait(f"server {a} healthy", "healthy again", timeout=90)
    assert second != first[a] and job_state(second) == "RUNNING"
    assert job_state(first[b]) == "RUNNING" and not up.having(f"server {b} exited")

    code, out, err = await finish(run, 180)
    assert code == 0, err[-2000:]
    assert f"http://{slurm.node}:{ports[0]}" in out + err, (out + err)[-3000:]  # the job's node
    tokens, records = recount(tmp_path / "out" / "A")  # asserts no sample_id twice
    assert tokens >= BUDGET and records > 0
    dataset = progress(tmp_path / "out" / "A")
    assert dataset["state"] == "done" and dataset["message"].startswith("budget reached")
    assert (dataset["tokens"], dataset["samples"]) == (tokens, records)  # nothing lost
    assert dataset["errors"] == 0 and dataset["malformed"] == 0

    up.process.send_signal(signal.SIGINT)  # Ctrl-C: the jobs stay
    assert await asyncio.wait_for(up.process.wait(), 30) == 0
    await up.task
    assert up.having("left the servers running")
    jobs = {a: second, b: first[b]}
    assert all(job_state(job) == "RUNNING" for job in jobs.values())

    status = await gen_tui_in(state, "servers", "--config", str(config), "status")
    code, out, err = await finish(status)
    assert code == 0, err
    assert f"{a}: healthy (job {second} on {slurm.node}," in out, out
    assert "1 restart(s) this hour" in out

    again = Lines(await gen_tui_in(state, "servers", "--config", str(config), "up"))
    for name, job in jobs.items():
        assert _job(await again.wait(f"server {name} loading")) == job  # the same job ids
        await again.wait(f"server {name} healthy")
    assert not again.having("starting"), again.lines  # adopted, nothing submitted
    again.process.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(again.process.wait(), 30) == 0

    stop = await gen_tui_in(state, "servers", "--config", str(config), "stop")
    code, out, err = await finish(stop, 120)
    assert code == 0, err
    for name, job in ((a, second), (b, first[b])):  # each drained (idle), then stopped
        assert re.search(rf"^{name}: drained in [0-9.]+ s; job {job} stopped", out, re.M), out
    assert job_state(second) in ("", "COMPLETED", "CANCELLED", "FAILED")
    assert job_state(second) != "RUNNING" and job_state(first[b]) != "RUNNING"


async def test_a_partition_that_does_not_exist_is_one_line_and_no_loop(
    slurm: Cluster, prefix: str, state: Path, tmp_path: Path, vocab_size: int
) -> None:
    name = f"{prefix}gpu"
    config = _config(tmp_path / "gen-tui.toml", [name], [free_port()], vocab_size, "no-such-part")
    up = await gen_tui_in(state, "servers", "--config", str(config), "up")
    code, out, err = await finish(up, 60)
    assert code == 1, out + err
    (failed,) = [line for line in out.splitlines() if "failed" in line]
    assert (
        f"server {name} failed: never came up: server {name}: sbatch refused the job on " in failed
    )
    assert "partition no-such-part: " in failed and "invalid partition" in failed.lower()
    assert "restarting" not in out and "Traceback" not in err
    assert cancel_jobs(prefix) == []  # nothing was queued
