"""Crash loop: a faulty simulator, a `gen-tui run` killed at random moments, resumed each time.

The simulator (a real `gen-tui sim` process) injects 5xx, 429, hangs past the client's
timeout, connection resets, torn JSON bodies and mid-stream failures; each cycle alternates
between plain and streamed requests. The run is killed by SIGKILL, SIGTERM, SIGINT or two
SIGTERMs, at a random moment (during start-up, or after a random number of new records),
and sometimes the checker leaves a torn record behind after a SIGKILL, as a crash in the
middle of a write would. After every cycle the independent checker (`checker.py`) verifies
the folders, and the simulator's list of completed requests says which answers the engine
must have written: all of them after a clean drain, all but those in flight at the kill
otherwise. A last, unkilled run must finish at the budget with every record once.

Reproduce a failure with the seed it prints: `CHAOS_SEED=... pytest tests/chaos -k crash`.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.demo import write_prompts
from tests.support.polling import wait_until_sync

from .checker import (
    CheckFailed,
    FolderState,
    check_folder,
    error_ids,
    inject_torn_tail,
    prompt_ids,
    sample_of_rid,
)
from .procs import RunProcess, SimProcess, record_lines

CONCURRENCY = 16
MAX_NEW_TOKENS = 1024
KILLS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGTERM_TWICE")
# Exit codes each way of stopping may give. A signal that lands before the engine installs
# its handlers (while Python imports) ends the process the default way (-15, -2), which is
# fine: nothing was written yet. 1 (an error) is never acceptable here.
ALLOWED_EXIT = {
    "SIGKILL": {-signal.SIGKILL},
    "SIGTERM": {0, -signal.SIGTERM},
    "SIGINT": {0, 130, -signal.SIGINT},
    "SIGTERM_TWICE": {0, 130, -signal.SIGTERM},
}
SIM_FAULTS = [
    "--fail-5xx", "0.03",
    "--fail-429", "0.03",
    "--retry-after", "0.2",
    "--fail-timeout", "0.005",
    "--hang-s", "8",
    "--fail-reset", "0.02",
    "--fail-torn", "0.03",
    "--fail-midstream", "0.02",
]  # fmt: skip
TORN_BODY = (
    b'{"sample_id":"A-0","completion_tokens":5,"prompt_tokens":9,"finish_reason":"stop",'
    b'"output_ids":[11,12,13,14,15],"text":"cut off by a crash"'
)


def wait_for_records(run: RunProcess, folders: list[Path], target: int, timeout: float) -> None:
    """Until the folders hold `target` records or the run has ended (the kill comes next,
    at that moment); a live run that writes nothing for `timeout` s is a hang: it fails."""
    wait_until_sync(
        lambda: not run.alive() or sum(record_lines(folder) for folder in folders) >= target,
        timeout,
        f"{target} records in {[f.name for f in folders]} (or the run's end)",
        interval=0.02,
        detail=lambda: run.stdout()[-1500:],
    )


def stop_run(run: RunProcess, kill: str, rng: random.Random) -> None:
    if kill == "SIGKILL":
        run.signal(signal.SIGKILL)
    elif kill == "SIGINT":
        run.signal(signal.SIGINT)
    else:
        run.signal(signal.SIGTERM)
        if kill == "SIGTERM_TWICE":
            time.sleep(rng.uniform(0.0, 0.8))
            run.signal(signal.SIGTERM)


@pytest.mark.quick
def test_crash_loop_loses_and_duplicates_nothing(
    tmp_path: Path, tokenizer_dir: Path, chaos_iterations: int, chaos_report: Any
) -> None:
    seed = int(os.environ.get("CHAOS_SEED", random.randrange(2**32)))
    print(f"crash loop seed: CHAOS_SEED={seed}")
    rng = random.Random(seed)
    cycles = chaos_iterations
    budget = 6_000 * cycles + 10_000
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", budget // 200 * 2 + 300)
    write_prompts(prompts / "B.jsonl", 50 + 30 * cycles)
    ids = {name: prompt_ids(prompts / f"{name}.jsonl") for name in ("A", "B")}
    out = tmp_path / "out"
    states = {name: FolderState(out / name) for name in ids}
    sim = SimProcess(
        tmp_path / "sim",
        [
            *("--slots", "32", "--tokens-per-s", "2000"),
            *("--profile", "A=200", "--profile", "B=100"),
            *SIM_FAULTS,
        ],
    ).start()
    logs = tmp_path / "logs"
    kills: Counter[str] = Counter()
    exits: Counter[str] = Counter()
    in_flight_lost = 0
    drained_missing: list[str] = []
    cursor = 0
    records_checked = 0
    raised_budget = 0
    started = time.monotonic()

    def args(stream: bool) -> list[str]:
        return [
            "--prompts-dir", str(prompts),
            "--tokenizer", str(tokenizer_dir),
            "--output-dir", str(out),
            "--server-url", sim.url,
            "--plain",
            "--concurrency", str(CONCURRENCY),
            "--parallel-datasets", "2",
            "--max-new-tokens", str(MAX_NEW_TOKENS),
            "--request-timeout", "4",
            "--token-budget", str(budget),
            *(["--stream"] if stream else []),
        ]  # fmt: skip

    def after_cycle(run: RunProcess, rc: int, label: str) -> bool:
        """Check every folder and the server's word; return whether the exit was clean."""
        nonlocal cursor, in_flight_lost, records_checked
        stderr = run.stderr()
        assert rc != 1, f"{label}: gen-tui run failed: {stderr[-2000:]}"
        if rc in (0, 130):
            assert "Traceback" not in stderr, f"{label}: {stderr[-2000:]}"
        clean = rc == 0
        time.sleep(0.3)  # let the server notice the hang-ups of a killed client
        completed = sim.stats()["completed_rids"]
        fresh, cursor = completed[cursor:], len(completed)
        by_dataset: dict[str, set[str]] = {name: set() for name in ids}
        for rid in fresh:
            parsed = sample_of_rid(rid)
            if parsed is not None and parsed[0] in by_dataset:
                by_dataset[parsed[0]].add(parsed[1])
        missing_total = 0
        for name, state in states.items():
            try:
                report = check_folder(state, ids[name], clean_exit=clean, pid=run.pid)
            except CheckFailed as exc:
                raise CheckFailed(f"{label} (seed {seed}): {exc}") from None
            records_checked += report.records
            missing = by_dataset[name] - state.ever
            if clean:
                unexplained = missing - error_ids(state.folder)
                drained_missing.extend(f"{name}/{key}" for key in unexplained)
            missing_total += len(missing)
        if clean:
            assert not drained_missing, (
                f"{label} (seed {seed}): completed by the server, drained, yet not written: "
                f"{drained_missing[:5]}"
            )
        else:
            # Only responses in flight at the kill may be lost (they are sent again later).
            assert missing_total <= CONCURRENCY, (
                f"{label} (seed {seed}): {missing_total} completed responses not on disk, more "
                f"than the {CONCURRENCY} that can be in flight"
            )
            in_flight_lost += missing_total
        return clean

    try:
        for cycle in range(cycles):
            stream = rng.random() < 0.5
            run = RunProcess(logs, f"cycle-{cycle}", args(stream))
            kill = rng.choice(KILLS)
            if rng.random() < 0.2:
                time.sleep(rng.uniform(0.05, 4.0))  # start-up: import, lock, scan, first sends
            else:
                before = sum(record_lines(state.folder) for state in states.values())
                target = before + rng.randint(1, 150)
                wait_for_records(run, [s.folder for s in states.values()], target, 90)
            label = f"cycle {cycle} ({kill}, {'stream' if stream else 'plain'})"
            if run.alive():
                stop_run(run, kill, rng)
                kills[kill] += 1
                rc = run.wait(timeout=90)
                assert rc in ALLOWED_EXIT[kill], (
                    f"{label}: exit {rc}; stderr: {run.stderr()[-2000:]}"
                )
            else:
                rc = run.wait(timeout=5)
                kills["none: finished first"] += 1
            exits[str(rc)] += 1
            clean = after_cycle(run, rc, label)
            if clean and states["A"].tokens >= budget:
                budget += 10_000  # as the panel's `r` would: resume with a bigger budget
                raised_budget += 1
            if kill == "SIGKILL" and not clean and rng.random() < 0.35:
                name = rng.choice(sorted(states))
                if states[name].raw.exists():
                    cut = rng.randint(8, len(TORN_BODY) - 1)
                    inject_torn_tail(states[name], TORN_BODY[:cut], newline=rng.random() < 0.3)

        final = RunProcess(logs, "final", args(stream=rng.random() < 0.5))
        rc = final.wait(timeout=240)
        exits[str(rc)] += 1
        assert rc == 0, f"final run: exit {rc}: {final.stderr()[-2000:]}"
        after_cycle(final, rc, "final run")
    finally:
        stats = sim.stats() if sim.process and sim.process.poll() is None else {}
        sim.stop()

    a, b = states["A"], states["B"]
    assert a.progress_state() == "done", a.folder
    assert budget <= a.tokens <= budget + CONCURRENCY * MAX_NEW_TOKENS, (a.tokens, budget)
    assert b.tokens < budget and b.ever == ids["B"], "B must end with every prompt once"
    assert b.progress_state() == "exhausted"
    finals = {name: Counter(r.sample_id for r in s.records_now()) for name, s in states.items()}
    lost = sum(len(state.ever - set(finals[name])) for name, state in states.items())
    duplicated = sum(n - 1 for counter in finals.values() for n in counter.values() if n > 1)
    faults = dict(stats.get("faults", {}))
    chaos_report(
        scenario="crash loop",
        iterations=cycles,
        seed=seed,
        kills=dict(kills),
        exits=dict(exits),
        server_faults=faults,
        server_requests=stats.get("requests"),
        torn_tails_injected=sum(s.injected for s in states.values()),
        torn_tails_quarantined=sum(s.quarantined for s in states.values()),
        records_final=a.records + b.records,
        records_checked=records_checked,
        in_flight_at_kill_resent=in_flight_lost,
        lost=lost + len(drained_missing),
        duplicated=duplicated,
        budget=budget,
        budget_raised=raised_budget,
        overshoot_tokens=a.tokens - budget,
        elapsed_s=round(time.monotonic() - started, 1),
    )
    assert lost == 0 and duplicated == 0
