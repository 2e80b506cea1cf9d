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


ISSUE_29_OPEN = (
    "issue 29 not yet met on a real server: --concurrency auto ramps past what the budget "
    "holds before answers are back (seen: 16 -> 32 -> 35 in a second, one answer on disk)"
)
"""Why the precision of a budgeted run against the real SGLang server is an expected failure
for now: when the CPU server answers fast, the ramp outruns the budget (4,177 to 4,401 for
4,000 in 4 of 10 direct runs on 5 December, 4,373 in 1 of 3 through the router; 4,019 to
4,095 in the others). Drop it with the fix."""


def precision_or_xfail(tokens: int, records: int, budget: int, allowed: float, said: str) -> None:
    """Hold a budgeted run's end to issue 29's precision: past it, an expected failure
    (ISSUE_29_OPEN) that pytest's summary reports with the figures and the run's last lines,
    never a pass. Called last in a test, after everything that must hold regardless."""
    if tokens > budget + allowed:
        tail = " | ".join(said.strip().splitlines()[-6:])
        pytest.xfail(
            f"{ISSUE_29_OPEN}: ended at {tokens:,} for {budget:,} ({records} answers, "
            f"{allowed:.0f} allowed past): {tail}"
        )
