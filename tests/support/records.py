"""Independent checks of a dataset folder: what the tests trust instead of the engine's word."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest


def read_records(folder: Path) -> list[dict]:
    path = folder / "raw_responses.jsonl"
    if not path.exists():
        return []
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "record file ends in a torn line"
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def recount(folder: Path) -> tuple[int, int]:
    """(tokens, records) recounted from the file with plain json, asserting no duplicates."""
    records = read_records(folder)
    ids = Counter(str(r["sample_id"]) for r in records)
    duplicated = [key for key, n in ids.items() if n > 1]
    assert not duplicated, f"duplicate sample_ids: {duplicated[:5]}"
    total = 0
    for record in records:
        if "output_ids" in record:
            assert len(record["output_ids"]) == record["completion_tokens"]
            total += record["completion_tokens"]
        else:
            total += record["usage"]["completion_tokens"]
    return total, len(records)


def progress(folder: Path) -> dict:
    return orjson.loads((folder / "progress.json").read_bytes())


def record_lines(folder: Path) -> int:
    """Complete lines in the record file right now (cheap enough to poll)."""
    path = folder / "raw_responses.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def record_commands(connection: Any) -> list[str]:
    """Every command line `connection` (an SSHConnection) sends from now on, in order: the
    tests check what reached the remote shell, and that a refused value reached nothing."""
    calls: list[str] = []
    run, open_process = connection.run, connection.open_process

    async def counted_run(command: str, **kwargs: Any) -> Any:
        calls.append(command)
        return await run(command, **kwargs)

    async def counted_open(command: str, **kwargs: Any) -> Any:
        calls.append(command)
        return await open_process(command, **kwargs)

    connection.run = counted_run
    connection.open_process = counted_open
    return calls


def budget_end(folder: Path, budget: int) -> tuple[int, int, float]:
    """(tokens, records, allowed) of `folder`: asserting it holds no sample twice and crossed
    `budget` (the default mode promises the crossing); `allowed` is issue 29's precision past
    the budget, max(0.2%, one mean answer), for the caller to hold the end to."""
    tokens, records = recount(folder)
    assert records, "no record was written"
    assert tokens >= budget, f"ended at {tokens:,}, short of its budget of {budget:,}"
    return tokens, records, max(0.002 * budget, tokens / records)


CROSSING = (
    "issue 29: the crossing answer passed the bound (held at p95, not in every run: since "
    "the cut only an answer sent beside others can; BENCHMARKS.md, 'Every budget kept from "
    "the first wave')"
)
"""Why a budgeted run against the real SGLang server may pass max(0.2%, one mean answer) and
still not fail: the default mode must cross its budget. Since 5 December its lone crossing
answer is cut at the room left plus a mean answer taken low (`--crossing-answer cut`), so
only a crossing answer sent while others were out (2 of 560 sweep runs) lands past one
bound. Before the length law's fix of the same day, 5 runs of 13 ended 1.6 to 3.5 bounds
past it; after it, 8 of 8 within one, the worst by its whole crossing answer's 5 tokens."""

HARD_BOUNDS = 2.0
"""How many bounds past its budget a run may end before the test fails: the property test's
bound for predictive's whole overshoot (tests/chaos/test_fuzz_first_wave.py)."""


def precision_or_xfail(tokens: int, records: int, budget: int, allowed: float, said: str) -> None:
    """Hold a budgeted run's end to issue 29's precision: past HARD_BOUNDS bounds a failure;
    past one, an expected failure (CROSSING) that pytest's summary reports with the figures
    and the run's last lines, never a pass. Called last in a test, after everything that
    must hold regardless."""
    tail = " | ".join(said.strip().splitlines()[-6:])
    figures = f"ended at {tokens:,} for {budget:,} ({records} answers, {allowed:.0f} allowed past)"
    assert tokens <= budget + HARD_BOUNDS * allowed, f"{figures}: {tail}"
    if tokens > budget + allowed:
        pytest.xfail(f"{CROSSING}: {figures}: {tail}")
