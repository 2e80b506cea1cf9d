"""Real `gen-tui run --api openai-batch` processes against a real `gen-tui sim` (issue 33, step 5):
a small budget kept, and a `kill -9` with three batches in flight that the same command
collects without sending a sample twice or losing or doubling a record."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from gen_tui.backends.demo import write_prompts
from gen_tui.backends.store.batch_journal import BatchJournal
from tests.support.batch_sim import (
    batch_args,
    sim_call,
    sim_process,
    slow_batches,
    three_batches_args,
    wait_for_batches,
    with_url,
)
from tests.support.records import read_records
from tests.support.runs import finish, spawn


async def test_a_small_budget_through_batches_ends_near_it(
    tokenizer_dir: Path, vocab_size: int, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "D.jsonl", 3000)
    out = tmp_path / "out"
    budget = 40_000
    with sim_process(vocab_size) as url:
        sim_call(url, "/_sim/config", {"batch_delay_s": 0.1, "batch_validate_s": 0.0})
        process = await spawn(
            *batch_args(tokenizer_dir, prompts, out, url, "--max-tokens-per-dataset", str(budget))
        )
        code, stdout, stderr = await finish(process, 110)
        assert code == 0, stderr + stdout
        ledger = sim_call(url, "/_sim/batches")
    records = read_records(out / "D")
    tokens = sum(r["completion_tokens"] for r in records)
    mean = tokens / len(records)
    assert abs(tokens - budget) <= max(0.002 * budget, mean), (tokens, stdout)
    assert len({r["sample_id"] for r in records}) == len(records)
    assert set(ledger["ledger"].values()) == {1}
    assert len(ledger["ledger"]) == len(records)
    # the batch price: half the live price of the same tokens (--cost 1,4 $/M)
    live = sum(r["prompt_tokens"] * 1 + r["completion_tokens"] * 4 for r in records) / 1e6
    assert sum(r["cost"] for r in records) == pytest.approx(live / 2)
    # the live path's records: `gen-tui verify` and `export` take them as they are
    verify = await spawn("verify", "--output-dir", str(out))
    code, said, err = await finish(verify, 60)
    assert code == 0 and f"D: {len(records)} records, ok" in said + err, said + err
    export = await spawn(
        "export", "--output-dir", str(out), "--format", "sharegpt", "--to", str(tmp_path / "x")
    )
    code, said, err = await finish(export, 60)
    assert code == 0, said + err
    assert len((tmp_path / "x").read_bytes().splitlines()) == len(records)


async def test_kill_9_with_three_batches_in_flight_then_the_same_command(
    tokenizer_dir: Path, vocab_size: int, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "K.jsonl", 2000)
    out = tmp_path / "out"
    with sim_process(vocab_size) as url:
        args = with_url(three_batches_args(tokenizer_dir, prompts, out), url)
        slow_batches(url, 30.0)
        first = await spawn(*args)
        await wait_for_batches(first, out / "K")
        os.killpg(first.pid, signal.SIGKILL)
        await first.wait()
        before = BatchJournal(out / "K")
        assert before.load() == [] and len(before.open) == 3
        in_flight = {b.batch_id for b in before.open.values()}
        sim_call(url, "/_sim/config", {"batch_delay_s": 0.1, "batch_finalize_s": 0.0})

        second = await spawn(*args)
        code, stdout, stderr = await finish(second, 110)
        assert code == 0, stderr + stdout
        sim = sim_call(url, "/_sim/batches")
    assert "resuming 3 batches in flight (60 samples): polled, not sent again" in stdout
    # no sample sent twice: every custom_id the simulator ever answered, once
    assert set(sim["ledger"].values()) == {1}, Counter(sim["ledger"].values())
    records = read_records(out / "K")
    ids = Counter(str(r["sample_id"]) for r in records)
    assert max(ids.values()) == 1  # no record doubled
    assert set(ids) == {cid.split("/", 1)[1] for cid in sim["ledger"]}  # none lost
    # the three batches of the killed run were downloaded: their lines are records
    for batch_id in in_flight:
        assert sim["batches"][batch_id]["status"] == "completed"
        assert f"batch {batch_id} completed: 20 answers kept" in stdout
    after = BatchJournal(out / "K")
    assert after.load() == [] and not after.open
    tokens = sum(r["completion_tokens"] for r in records)
    assert abs(tokens - 30_000) <= max(60, tokens / len(records)), tokens


async def test_sigterm_cancels_the_batches_in_flight_and_keeps_what_they_finished(
    tokenizer_dir: Path, vocab_size: int, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "S.jsonl", 2000)
    out = tmp_path / "out"
    with sim_process(vocab_size) as url:
        args = with_url(three_batches_args(tokenizer_dir, prompts, out), url)
        slow_batches(url, 4.0)
        first = await spawn(*args)
        await wait_for_batches(first, out / "S")
        await asyncio.sleep(1.5)  # a part of each batch done
        os.killpg(first.pid, signal.SIGTERM)
        code, stdout, stderr = await finish(first, 60)
        sim = sim_call(url, "/_sim/batches")
    assert code == 0, stderr
    assert "stopping: cancelling 3 batches in flight" in stdout, stdout + stderr
    assert "bills the requests each finished before the cancel" in stdout
    statuses = Counter(b["status"] for b in sim["batches"].values())
    assert statuses == {"cancelled": 3}, statuses
    records = read_records(out / "S")
    answered = {cid.split("/", 1)[1] for cid in sim["ledger"]}
    assert 0 < len(records) < 60
    assert {str(r["sample_id"]) for r in records} == answered  # the billed lines are kept
    journal = BatchJournal(out / "S")
    assert journal.load() == [] and not journal.open  # nothing left to collect
