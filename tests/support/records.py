"""Independent checks of a dataset folder: what the tests trust instead of the engine's word."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson


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


def ended_within_precision(folder: Path, budget: int) -> tuple[int, int]:
    """(tokens, records) of `folder`, asserting it crossed `budget` by no more than issue 29's
    precision, max(0.2%, one mean answer), and holds no sample twice."""
    tokens, records = recount(folder)
    assert records, "no record was written"
    allowed = max(0.002 * budget, tokens / records)
    assert budget <= tokens <= budget + allowed, (
        f"ended at {tokens:,} for {budget:,} ({records} answers, {allowed:.0f} allowed past)"
    )
    return tokens, records
