"""A supervised server's Slurm job cancelled again and again under a run (issue 32).

`gen-tui servers up` keeps a `gen-tui sim` from a `launcher = "slurm"` recipe alive as a
batch job of the real one-node Slurm (`.ci/slurm-up`; skipped, saying why, when it is not
up); one `gen-tui run` sends to it on its node and answers every prompt. Each round, once
the run has written its share, the job (its id from gen-tui's own state file) is
cancelled with `scancel`, the crash of a cluster; the supervisor must see the job ended and
submit it again, and the run must finish every prompt exactly once, exit 0, with the
independent checker's verdict on the folder.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from gen_tui.backends.demo import write_prompts
from gen_tui.backends.servers.state import StateFile
from tests.support.polling import wait_until_sync
from tests.support.ports import free_port
from tests.support.runs import GEN_TUI
from tests.support.server_rounds import crash_each_round, end_servers_up, servers_up
from tests.support.slurm import Cluster, cancel_jobs, job_state

from .checker import FolderState, check_folder, prompt_ids
from .procs import RunProcess, child_env, record_lines


def _running_job(folder: Path, name: str) -> str | None:
    entry = StateFile(folder).read().get(name)
    launched = entry.launched if entry else None
    if launched is None or launched.node is None or job_state(launched.ref) != "RUNNING":
        return None
    return launched.ref


def test_a_slurm_job_cancelled_each_round_loses_and_duplicates_nothing(
    tmp_path: Path, tokenizer_dir: Path, chaos_iterations: int, chaos_report: Any, slurm: Cluster
) -> None:
    name = f"chaos{os.getpid()}-sim"
    rounds = chaos_iterations
    count = 80 * rounds + 60
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", count)
    ids = prompt_ids(prompts / "A.jsonl")
    port = free_port()
    argv = [*GEN_TUI, "sim", "--port", str(port), "--slots", "8", "--tokens-per-s", "1000"]
    argv += ["--default-mean", "120"]
    config = tmp_path / "gen-tui.toml"
    config.write_text(
        '[[servers]]\nname = "{}"\nargv = [{}]\nport = {}\nbackoff_s = 0.2\n'
        'backoff_max_s = 1\nmax_restarts_per_hour = {}\nlauncher = "slurm"\n'
        '[servers.slurm]\npartition = "{}"\n'.format(
            name, ", ".join(f'"{word}"' for word in argv), port, rounds + 2, slurm.partition
        )
    )
    env = child_env(XDG_STATE_HOME=str(tmp_path / "state"))
    folder = tmp_path / "state" / "gen-tui" / "servers"
    up = servers_up(config, env, tmp_path / "up.out")
    started = time.monotonic()
    out_dir = tmp_path / "out"
    run: RunProcess | None = None
    jobs: list[str] = []
    try:
        jobs.append(
            wait_until_sync(lambda: _running_job(folder, name), 60, "the server's first job")
        )
        wait_until_sync(
            lambda: f"server {name} healthy" in (tmp_path / "up.out").read_text(),
            60,
            "the server healthy before the run probes it",
        )
        run = RunProcess(
            tmp_path / "logs",
            "run",
            [
                "--prompts-dir", str(prompts),
                "--tokenizer", str(tokenizer_dir),
                "--output-dir", str(out_dir),
                "--server-url", f"http://{slurm.node}:{port}",
                "--config", str(config),
                "--plain",
                "--concurrency", "12",
                "--max-new-tokens", "512",
            ],
            env=env,
        )  # fmt: skip
        jobs = crash_each_round(
            run,
            rounds,
            count,
            lambda: record_lines(out_dir / "A"),
            jobs[0],
            lambda job: subprocess.run(["scancel", job], check=True, timeout=30),
            lambda: _running_job(folder, name),
            tmp_path / "up.out",
        )
        rc = run.wait(timeout=120 + 30 * rounds)
    finally:
        end_servers_up(run, up)
        cancel_jobs(name)
    log = (tmp_path / "up.out").read_text()
    assert rc == 0, run.stderr()[-2000:]
    kills = len(jobs) - 1
    assert log.count("ended CANCELLED") == kills and log.count("healthy again") == kills, log
    assert "failed" not in log and "down" not in log, log
    state = FolderState(out_dir / "A")
    check_folder(state, ids, clean_exit=True, pid=run.pid)
    assert state.ever == ids, f"{len(ids - state.ever)} prompts never answered"
    assert state.progress_state() == "exhausted"
    records = state.records_now()
    assert StateFile(folder).read()[name].total_restarts == kills
    chaos_report(
        scenario="slurm job cancels",
        iterations=rounds,
        job_cancels=kills,
        restarts=StateFile(folder).read()[name].total_restarts,
        records_checked=len(records),
        lost=len(ids - {record.sample_id for record in records}),
        duplicated=len(records) - len({record.sample_id for record in records}),
        elapsed_s=round(time.monotonic() - started, 1),
    )
