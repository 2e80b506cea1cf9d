"""Memory: peak RSS of `gen-tui run` on a small prompt file vs one 100 times larger.

Both runs send the same requests: a `gen-tui sim` that answers at once, and a token budget
that stops the run after the first few thousand prompts, so whatever grows with the file's
size (rather than with the work done) shows as the difference. Peak RSS is the kernel's own
(`ru_maxrss` of the exited child, from `wait4`), not a sample.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from bench.common import (
    CACHE,
    ENV,
    GEN_TUI,
    SCRATCH,
    Table,
    prompts,
    publish,
    simulator,
    tokenizer,
    verdict,
)
from gen_tui.backends.store.records import RAW_FILE

TARGET = 1.2


def peak_rss(prompt_file: Path, url: str, out: Path, budget: int) -> tuple[float, float, int]:
    """(peak RSS in MB, wall s, records) of one `gen-tui run` to the budget."""
    shutil.rmtree(out, ignore_errors=True)
    argv = [
        *GEN_TUI,
        "run",
        *("--prompts-dir", str(prompt_file.parent), "--output-dir", str(out)),
        *("--server-url", url, "--tokenizer", str(tokenizer())),
        *("--max-tokens-per-dataset", str(budget), "--max-new-tokens", "128", "--plain"),
    ]
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, cwd=CACHE
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        assert process.stderr is not None
        raise RuntimeError(f"gen-tui run failed: {process.stderr.read().decode()[-2000:]}")
    with open(next(out.glob(f"*/{RAW_FILE}")), "rb") as handle:
        records = sum(1 for _ in handle)
    return usage.ru_maxrss / 1024, wall, records


def run(smoke: bool, write: bool) -> bool:
    # Each budget needs about budget / 58 prompts (the simulator's mean answer is 64 tokens,
    # some stop early): fewer than the small file holds, so neither run runs out.
    small, large, budget = (1_000, 100_000, 20_000) if smoke else (10_000, 1_000_000, 200_000)
    files = {count: prompts("M", count) for count in (small, large)}  # the large one is cached
    tokenizer()
    results = {}
    with simulator("--slots", "1000", "--tokens-per-s", "1e9", "--default-mean", "64") as url:
        if not smoke:  # page cache and bytecode, so that the first run pays no extra
            peak_rss(files[small], url, SCRATCH / "out-memory" / "warm-up", budget)
        for count, path in files.items():
            results[count] = peak_rss(path, url, SCRATCH / "out-memory" / str(count), budget)
            if results[count][2] >= small:
                raise RuntimeError(f"the run used all {small:,} prompts: lower the budget")
    shutil.rmtree(SCRATCH / "out-memory", ignore_errors=True)
    base = results[small][0]
    ratio = results[large][0] / base
    met = ratio <= TARGET
    table = Table(
        "memory",
        f"Memory (peak RSS of `gen-tui run`, {small:,} vs {large:,} prompts, "
        f"target: <= {TARGET:g}x)",
        f"python -m bench memory{' --smoke' if smoke else ''}",
        ["prompt file", "size", "records written", "wall", "peak RSS", "vs small", "target"],
    )
    for count, (rss, wall, records) in results.items():
        table.add(
            f"{count:,} prompts",
            f"{files[count].stat().st_size / 1e6:.1f} MB",
            f"{records:,}",
            f"{wall:.1f} s",
            f"{rss:.0f} MB",
            f"{rss / base:.2f}x",
            f"<= {TARGET:g}x: {verdict(met)}" if count == large else "(baseline)",
        )
    table.notes.append(
        f"Budget {budget:,} tokens against a simulator that answers at once (64-token "
        f"answers), so both runs do the same work and stop after the first "
        f"{results[small][2]:,} prompts or so. Peak RSS is `ru_maxrss` of the exited "
        "process (tokenizer and imports included)."
    )
    publish(table, write)
    return met
