"""Server churn: servers that die, come back, change speed, or never answer at all.

One `gen-tui run` is given three URLs: one where nothing ever listens, and two real
`gen-tui sim` processes. While it runs, the first simulator is stopped (SIGTERM, which
aborts its in-flight requests) or killed (SIGKILL) and brought back on the same port after
a pause, and its speed is changed; half-way the second one is killed for good. The run
must finish every prompt exactly once, exit 0, and its log must say which server it could
not reach.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Any

from gen_tui.backends.demo import write_prompts
from tests.support.polling import wait_until_sync
from tests.support.ports import free_port

from .checker import FolderState, check_folder, prompt_ids
from .procs import RunProcess, SimProcess, record_lines


def test_servers_dying_and_returning_lose_and_duplicate_nothing(
    tmp_path: Path, tokenizer_dir: Path, chaos_iterations: int, chaos_report: Any
) -> None:
    rng = random.Random()
    rounds = chaos_iterations
    count = 80 * rounds + 60
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", count)
    ids = prompt_ids(prompts / "A.jsonl")
    sim_args = ["--slots", "8", "--tokens-per-s", "1000", "--default-mean", "120"]
    churned = SimProcess(tmp_path / "sim1", sim_args).start()
    doomed = SimProcess(tmp_path / "sim2", sim_args).start()
    dead = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "out"
    run = RunProcess(
        tmp_path / "logs",
        "run",
        [
            "--prompts-dir", str(prompts),
            "--tokenizer", str(tokenizer_dir),
            "--output-dir", str(out),
            "--server-url", dead,
            "--server-url", churned.url,
            "--server-url", doomed.url,
            "--plain",
            "--concurrency", "12",
            "--max-new-tokens", "512",
        ],
    )  # fmt: skip
    stops: dict[str, int] = {}
    started = time.monotonic()
    try:
        for index in range(rounds):
            target = (index + 1) * count // (rounds + 2)
            wait_until_sync(
                lambda t=target: record_lines(out / "A") >= t or not run.alive(),
                120,
                f"{target} records (or the run's end)",
            )
            if not run.alive():
                break
            how = rng.choice([signal.SIGTERM, signal.SIGKILL])
            churned.stop(how)
            stops[how.name] = stops.get(how.name, 0) + 1
            if index == rounds // 2 and doomed.process and doomed.process.poll() is None:
                doomed.stop(signal.SIGKILL)  # and it never comes back
                stops["doomed"] = 1
            time.sleep(rng.uniform(0.5, 2.5))
            churned.start()
            churned.configure({"tokens_per_s": rng.choice([300.0, 1000.0, 3000.0])})
        rc = run.wait(timeout=120 + 30 * rounds)
    finally:
        if run.alive():
            run.signal(signal.SIGKILL)
        churned.stop()
        doomed.stop()
    stdout = run.stdout()
    assert rc == 0, run.stderr()[-2000:]
    assert f"server {dead} not answering yet" in stdout, stdout[-2000:]
    state = FolderState(out / "A")
    check_folder(state, ids, clean_exit=True, pid=run.pid)
    assert state.ever == ids, f"{len(ids - state.ever)} prompts never answered"
    assert state.progress_state() == "exhausted"
    records = state.records_now()
    chaos_report(
        scenario="server churn",
        iterations=rounds,
        server_stops=stops,
        sim_restarts=churned.starts - 1,
        dead_urls=1,
        records_checked=len(records),
        lost=len(ids - {record.sample_id for record in records}),
        duplicated=len(records) - len({record.sample_id for record in records}),
        elapsed_s=round(time.monotonic() - started, 1),
    )
