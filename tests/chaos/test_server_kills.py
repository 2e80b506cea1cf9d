"""A supervised server killed again and again under a run (issue 32).

`gen-tui servers up` keeps a `gen-tui sim` from a recipe alive; one `gen-tui run` names
the server by its recipe and answers every prompt. Each round, once the run has written
its share, the server's current pid (from gen-tui's own state file) gets SIGKILL; the
supervisor must see it exit and bring it back with a new pid, and the run must finish
every prompt exactly once, exit 0, with the independent checker's verdict on the folder.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil

from gen_tui.backends.demo import write_prompts
from gen_tui.backends.servers.state import StateFile
from tests.support.polling import wait_until_sync
from tests.support.ports import free_port
from tests.support.runs import GEN_TUI
from tests.support.server_rounds import crash_each_round, end_servers_up, servers_up
from tests.support.servers import kill_servers

from .checker import FolderState, check_folder, prompt_ids
from .procs import RunProcess, child_env, record_lines


def _server_pid(folder: Path) -> int | None:
    entry = StateFile(folder).read().get("sim0")
    launched = entry.launched if entry else None
    if launched is None or launched.identity is None:
        return None
    pid = launched.identity.pid
    try:
        return pid if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
    except psutil.NoSuchProcess:
        return None


def test_a_supervised_server_killed_each_round_loses_and_duplicates_nothing(
    tmp_path: Path, tokenizer_dir: Path, chaos_iterations: int, chaos_report: Any
) -> None:
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
        '[[servers]]\nname = "sim0"\nargv = [{}]\nport = {}\nbackoff_s = 0.2\n'
        "backoff_max_s = 1\nmax_restarts_per_hour = {}\n".format(
            ", ".join(f'"{word}"' for word in argv), port, rounds + 2
        )
    )
    env = child_env(XDG_STATE_HOME=str(tmp_path / "state"))
    folder = tmp_path / "state" / "gen-tui" / "servers"
    up = servers_up(config, env, tmp_path / "up.out")
    started = time.monotonic()
    out_dir = tmp_path / "out"
    run: RunProcess | None = None
    pids: list[int] = []
    try:
        pids.append(wait_until_sync(lambda: _server_pid(folder), 60, "the server's first pid"))
        run = RunProcess(
            tmp_path / "logs",
            "run",
            [
                "--prompts-dir", str(prompts),
                "--tokenizer", str(tokenizer_dir),
                "--output-dir", str(out_dir),
                "--server-url", "sim0",
                "--config", str(config),
                "--plain",
                "--concurrency", "12",
                "--max-new-tokens", "512",
            ],
            env=env,
        )  # fmt: skip
        pids = crash_each_round(
            run,
            rounds,
            count,
            lambda: record_lines(out_dir / "A"),
            pids[0],
            lambda pid: os.kill(pid, signal.SIGKILL),
            lambda: _server_pid(folder),
            tmp_path / "up.out",
        )
        rc = run.wait(timeout=120 + 30 * rounds)
    finally:
        end_servers_up(run, up)
        kill_servers(folder)
    log = (tmp_path / "up.out").read_text()
    assert rc == 0, run.stderr()[-2000:]
    kills = len(pids) - 1
    assert log.count("killed by SIGKILL") == kills and log.count("healthy again") == kills, log
    assert "failed" not in log and "down" not in log, log
    state = FolderState(out_dir / "A")
    check_folder(state, ids, clean_exit=True, pid=run.pid)
    assert state.ever == ids, f"{len(ids - state.ever)} prompts never answered"
    assert state.progress_state() == "exhausted"
    records = state.records_now()
    assert StateFile(folder).read()["sim0"].total_restarts == kills
    chaos_report(
        scenario="supervised server kills",
        iterations=rounds,
        server_kills=kills,
        restarts=StateFile(folder).read()["sim0"].total_restarts,
        records_checked=len(records),
        lost=len(ids - {record.sample_id for record in records}),
        duplicated=len(records) - len({record.sample_id for record in records}),
        elapsed_s=round(time.monotonic() - started, 1),
    )
