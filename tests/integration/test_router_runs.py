"""Real `gen-tui run` processes through a real sglang-router over two simulators: the budget
holds, SIGTERM drains with every answer the workers completed on disk once, and a second
signal aborts on every worker (which the router alone would not: it answers 404)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.sim import LengthProfile
from gen_tui.backends.sim.server import SimServer
from tests.support.locks import is_locked
from tests.support.polling import wait_until
from tests.support.records import read_records, record_lines, recount
from tests.support.runs import finish, run_args, spawn


def completed_samples(*workers: SimServer) -> list[str]:
    """The sample ids the workers completed (the engine's rid is `dataset/sample_id/hex`)."""
    return [rid.split("/")[1] for w in workers for rid in w.stats.completed_rids]


def assert_on_disk_once(folder: Path, *workers: SimServer) -> None:
    """Every answer a worker completed is a record, and no record is there twice."""
    recount(folder)  # asserts no sample twice, ids matching counts
    written = sorted(str(record["sample_id"]) for record in read_records(folder))
    assert written == sorted(completed_samples(*workers)), "a completed answer was not written"


async def test_a_budget_through_the_router_ends_within_precision(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, router: Any, tmp_path: Path
) -> None:
    fast = {"tokens_per_s": 5000, "slots": 16, "profiles": {"A": LengthProfile(mean=400)}}
    first, second = await sim(**fast), await sim(**fast)
    url = await router(first.url, second.url)
    budget = 100_000
    out = tmp_path / "out"
    process = await spawn(
        *run_args(tokenizer_dir, prompts_dir(A=1500), out, url, "--concurrency", "48"),
        *("--max-tokens-per-dataset", str(budget)),
    )
    code, stdout, stderr = await finish(process, timeout=120)
    assert code == 0, stderr
    tokens, _ = recount(out / "A")
    assert budget <= tokens < budget * 1.02, f"ended at {tokens:,} for {budget:,}"
    assert first.stats.completed > 0 and second.stats.completed > 0, "one worker did it all"
    assert_on_disk_once(out / "A", first, second)
    said = [line for line in stdout.splitlines() if "is an SGLang router over 2 workers" in line]
    assert len(said) == 1, stdout
    assert first.url in said[0] and second.url in said[0]


async def test_the_capacity_advice_sums_the_workers_behind_the_router(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, router: Any, tmp_path: Path
) -> None:
    first, second = await sim(slots=8), await sim(slots=16)
    url = await router(first.url, second.url)
    out = tmp_path / "out"
    process = await spawn(
        *run_args(tokenizer_dir, prompts_dir(A=20), out, url, "--concurrency", "16"),
    )
    code, stdout, stderr = await finish(process)
    assert code == 0, stderr
    assert "max_running_requests 24" in stdout, stdout


async def test_sigterm_drains_every_worker_onto_disk_once(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, router: Any, tmp_path: Path
) -> None:
    paced = {"tokens_per_s": 400, "slots": 8, "profiles": {"A": LengthProfile(mean=300)}}
    first, second = await sim(**paced), await sim(**paced)
    url = await router(first.url, second.url)
    out = tmp_path / "out"
    process = await spawn(
        *run_args(tokenizer_dir, prompts_dir(A=500), out, url, "--concurrency", "16")
    )
    await wait_until(lambda: record_lines(out / "A") >= 10)
    await wait_until(lambda: first.stats.in_flight >= 4 and second.stats.in_flight >= 4)
    process.send_signal(signal.SIGTERM)
    code, stdout, stderr = await finish(process)
    assert code == 0, stderr
    assert "draining" in stdout
    assert first.stats.aborted == second.stats.aborted == 0
    assert first.stats.abort_requests == second.stats.abort_requests == 0
    assert_on_disk_once(out / "A", first, second)
    assert 0 < record_lines(out / "A") < 500
    assert not is_locked(out / "A" / "run.lock")


async def test_a_second_signal_aborts_on_every_worker(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, router: Any, tmp_path: Path
) -> None:
    slow = {"tokens_per_s": 50, "slots": 8, "profiles": {"A": LengthProfile(mean=2000)}}
    first, second = await sim(**slow), await sim(**slow)
    url = await router(first.url, second.url)
    out = tmp_path / "out"
    process = await spawn(
        *run_args(tokenizer_dir, prompts_dir(A=100), out, url, "--concurrency", "8")
    )
    await wait_until(lambda: first.stats.in_flight + second.stats.in_flight >= 8)
    held = (first.stats.in_flight, second.stats.in_flight)
    assert min(held) > 0, f"round robin left a worker idle: {held}"
    process.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    code, stdout, stderr = await finish(process, timeout=30)
    assert code == 130, stderr
    assert "aborted" in stdout
    await wait_until(lambda: first.stats.in_flight + second.stats.in_flight == 0, timeout=10)
    # Each worker was asked to stop every rid in flight (the client cannot know which one
    # runs which), so each got at least as many as it ran.
    assert first.stats.abort_requests >= held[0] and first.stats.aborted >= held[0]
    assert second.stats.abort_requests >= held[1] and second.stats.aborted >= held[1]
    assert first.stats.abort_requests == second.stats.abort_requests
    assert_on_disk_once(out / "A", first, second)
    assert not is_locked(out / "A" / "run.lock")
