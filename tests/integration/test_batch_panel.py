"""Issue 33's remaining points, against real processes: a `gen-tui run --api openai-batch`
writes its batches in flight into progress.json as it polls a real `gen-tui sim` (with its
batch delay), the real watcher passes them on and the reader takes them back; the endgame
with no live finish is said once and ends in one round trip; a second --server-url is
refused in one line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends.demo import write_prompts
from gen_tui.backends.progress.batches import BATCH_WINDOW_S, batches_line
from gen_tui.backends.store.progress_file import ProgressFile
from tests.support.batch_sim import (
    batch_args,
    sim_call,
    sim_process,
    slow_batches,
    three_batches_args,
    with_url,
)
from tests.support.records import read_records
from tests.support.runs import ENV, finish, spawn


def progress_of(folder: Path) -> dict[str, Any] | None:
    try:
        value = orjson.loads((folder / "progress.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def watcher_progress(out: Path, dataset: str) -> dict[str, Any]:
    """The dataset's progress.json as the real watcher (`--once`) forwards it."""
    said = subprocess.run(
        [sys.executable, "-m", "gen_tui.backends.watcher", "--once", str(out), dataset],
        capture_output=True, text=True, timeout=30, env=ENV, check=True,
    )  # fmt: skip
    for line in said.stdout.splitlines():
        message = json.loads(line)
        if message.get("type") == "dataset" and message.get("progress"):
            progress = message["progress"]
            assert isinstance(progress, dict)
            return progress
    raise AssertionError(f"no progress forwarded: {said.stdout[:2000]}")


async def test_progress_json_carries_each_batch_in_flight_and_the_watcher_passes_it_on(
    tokenizer_dir: Path, vocab_size: int, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "P.jsonl", 2000)
    out = tmp_path / "out"
    with sim_process(vocab_size) as url:
        slow_batches(url, 8.0)
        run = await spawn(*with_url(three_batches_args(tokenizer_dir, prompts, out), url))
        try:
            deadline = time.monotonic() + 60
            seen: dict[str, Any] | None = None
            while time.monotonic() < deadline:
                assert run.returncode is None, "the run ended before its batches were seen"
                progress = progress_of(out / "P")
                batches = (progress or {}).get("batches") or []
                if len(batches) == 3 and all(0 < b["completed"] < b["total"] for b in batches):
                    seen = progress
                    break
                await asyncio.sleep(0.1)
            assert seen is not None, "no progress.json with 3 batches part done"
            forwarded = watcher_progress(out, "P")
        finally:
            run.terminate()
            code, stdout, stderr = await finish(run, 60)
        sim = sim_call(url, "/_sim/batches")["batches"]
    assert code == 0, stderr + stdout
    now = time.time()
    for batch in seen["batches"]:
        # the provider's own words: its id, status and counts, as it said them
        assert batch["id"] in sim, batch
        assert batch["status"] == "in_progress"
        assert batch["total"] == 20 and batch["failed"] == 0
        assert abs(batch["created_at"] - sim[batch["id"]]["created_at"]) < 1e-6
        # the age against the 24 h window, and an ETA from the provider's progress
        assert batch["window_s"] == BATCH_WINDOW_S
        assert 0 <= batch["age_s"] <= now - batch["created_at"] + 1
        # the pace since it began to run (the simulator's in_progress_at), the rest at it
        done, began = batch["completed"], batch["in_progress_at"]
        assert batch["created_at"] <= began <= now
        running = batch["age_s"] - (began - batch["created_at"])
        assert abs(batch["eta_s"] - running * (20 - done) / done) < 1e-6
    # the watcher forwards them as written; the reader takes them back field by field
    assert forwarded.get("batches"), forwarded
    parsed = ProgressFile.parse(forwarded)
    assert parsed is not None and parsed.batches is not None and len(parsed.batches) >= 1
    assert {b.id for b in parsed.batches} <= set(sim)
    assert batches_line(parsed.batches, now).startswith(f"{len(parsed.batches)} batch"), (
        parsed.batches
    )
    # the saving against the live price (the simulator bills batches at half of it)
    records = read_records(out / "P")
    final = progress_of(out / "P")
    assert final is not None and records
    spent = sum(r["cost"] for r in records)
    assert final["cost_saved"] is not None
    assert abs(final["cost_saved"] - spent) < 1e-9  # half price: saved as much as spent
    assert final["batches"] == []  # none left in flight once the stop has collected them


@pytest.mark.parametrize("mode", ["predictive", "precise"])
async def test_the_endgame_without_a_live_finish_is_said_once_and_ends_in_one_round_trip(
    tokenizer_dir: Path, vocab_size: int, tmp_path: Path, mode: str
) -> None:
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "E.jsonl", 3000)
    out = tmp_path / "out"
    budget = 20_000
    with sim_process(vocab_size) as url:
        sim_call(url, "/_sim/config", {"batch_delay_s": 0.1, "batch_validate_s": 0.0})
        args = batch_args(tokenizer_dir, prompts, out, url, "--max-tokens-per-dataset", str(budget))
        run = await spawn(*args, "--budget-mode", mode)
        code, stdout, stderr = await finish(run, 110)
        ledger = sim_call(url, "/_sim/batches")["ledger"]
    assert code == 0, stderr + stdout
    lines = stdout.splitlines()
    said = [
        i for i, line in enumerate(lines) if "and no live finish (--batch-live-finish 0)" in line
    ]
    assert len(said) == 1, stdout  # said once
    waves = [
        int(line.split(" created with ")[1].split()[0].replace(",", ""))
        for line in lines[said[0] :]
        if " created with " in line
    ]
    assert sum(" created with " in line for line in lines[: said[0]]) >= 2, stdout
    if mode == "precise":
        # its rule stops short: no wave may be sized to end it; that is what is said
        assert "precise mode stops short" in lines[said[0]], lines[said[0]]
        assert "--batch-live-finish 0.02 ends it live" in lines[said[0]]
        assert "budget reached" in stdout and "no room for one more" in stdout
    else:
        last = int(lines[said[0]].split("the last batch of ")[1].split()[0])
        assert "ends the dataset in one provider round trip" in lines[said[0]]
        # the last wave is the one said, more than the margin would send (the simulator is
        # seeded: this run's margin-sized waves went 18, 4, 2, 1, 1, 1, 1 before)
        assert waves[0] == last and last >= 4, waves
        # should it come back short (sized at the mean), what is left is less than that
        # wave, sized the same way: no tail of waves of one answer each
        assert all(wave < last for wave in waves[1:]) and len(waves) <= 4, waves
    records = read_records(out / "E")
    tokens = sum(r["completion_tokens"] for r in records)
    mean = tokens / len(records)
    if mode == "precise":  # it stops short, by less than about two answers (docs/batch.md)
        assert budget - 2 * mean <= tokens <= budget, tokens
    else:
        assert abs(tokens - budget) <= max(0.002 * budget, mean), tokens
    assert set(ledger.values()) == {1}


async def test_a_second_server_url_is_refused_in_one_line(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "U.jsonl", 10)
    args = batch_args(tokenizer_dir, prompts, tmp_path / "out", "http://127.0.0.1:9")
    run = await spawn(*args, "--server-url", "http://127.0.0.1:10")
    code, stdout, stderr = await finish(run, 60)
    assert code != 0
    said = (stdout + stderr).strip()
    assert "Traceback" not in said
    assert "--api openai-batch takes one --server-url, not 2" in said, said
    assert "a batch lives at the provider that created it" in said
    assert not (tmp_path / "out" / "U").exists()  # refused before anything was written
