"""What an engine run finds already in its output folder: records of either layout are counted
and their prompts skipped (a dataset at its budget runs nothing), a torn last line is set
aside and named, a corrupt line refuses the run at file:line, and a folder another writer
holds is refused.

The engine in-process against the simulator on loopback, with a real tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends.config.run import EngineError
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.store.lock import DatasetLock
from tests.support.engine import make_config, run
from tests.support.records import read_records, recount


def _old_record(sample_id: str, tokens: int) -> bytes:
    return (
        orjson.dumps({"sample_id": sample_id, "text": "t", "usage": {"completion_tokens": tokens}})
        + b"\n"
    )


@pytest.mark.quick
async def test_resume_skips_done_and_counts_both_layouts(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    new = (
        orjson.dumps(
            {
                "sample_id": "A-1",
                "output_ids": [7] * 50,
                "prompt_tokens": 3,
                "completion_tokens": 50,
                "finish_reason": "stop",
            }
        )
        + b"\n"
    )
    (out / "A" / "raw_responses.jsonl").write_bytes(_old_record("A-0", 100) + new)
    config = make_config(tokenizer_dir, prompts_dir(A=20), out, [server.url])
    final, events, _ = await run(config)
    assert final.datasets[0].resumed_tokens == 150
    assert final.datasets[0].resumed_samples == 2
    assert server.stats.requests == 18
    assert not any(rid.split("/")[1] in {"A-0", "A-1"} for rid in server.stats.completed_rids)
    records = read_records(out / "A")
    assert len(records) == 20 and len({str(r["sample_id"]) for r in records}) == 20
    assert any("resuming with 2 records, 150 tokens" in message for _, message in events)


async def test_resume_at_budget_does_nothing(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    (out / "A" / "raw_responses.jsonl").write_bytes(_old_record("A-0", 5000))
    config = make_config(
        tokenizer_dir, prompts_dir(A=20), out, [server.url], budgets={"A": (4000, None)}
    )
    final, events, _ = await run(config)
    assert server.stats.requests == 0
    assert final.datasets[0].state is DatasetState.DONE
    assert any("already at its budget" in message for _, message in events)


async def test_torn_tail_is_quarantined_and_reported(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    torn = b'{"sample_id": "A-3", "completion_tokens": 12, "output_ids": [1, 2'
    (out / "A" / "raw_responses.jsonl").write_bytes(_old_record("A-0", 10) + torn)
    config = make_config(tokenizer_dir, prompts_dir(A=10), out, [server.url])
    _, events, _ = await run(config)
    sides = list((out / "A").glob("raw_responses.jsonl.torn.*"))
    assert len(sides) == 1 and sides[0].read_bytes() == torn
    assert any("torn last line" in message and str(sides[0]) in message for _, message in events)
    assert recount(out / "A")[1] == 10


async def test_corrupt_record_file_refuses_with_location(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    (out / "A" / "raw_responses.jsonl").write_bytes(
        _old_record("A-0", 10) + b"garbage\n" + _old_record("A-1", 10)
    )
    config = make_config(tokenizer_dir, prompts_dir(A=10), out, [server.url])
    with pytest.raises(EngineError, match=r"raw_responses.jsonl:2: not valid JSON"):
        await run(config)
    assert server.stats.requests == 0


async def test_second_writer_is_refused(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    lock = DatasetLock(out / "A" / "run.lock")
    lock.acquire()
    try:
        config = make_config(tokenizer_dir, prompts_dir(A=10), out, [server.url])
        with pytest.raises(EngineError, match=r"already being written by pid \d+ on "):
            await run(config)
    finally:
        lock.release()
