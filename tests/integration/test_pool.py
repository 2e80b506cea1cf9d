"""Many datasets, one server: the shared slot pool, tapering hand-off, and the total budget."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.app.engine_run import ConfigSource, only_dataset
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import DatasetState, RunSnapshot
from gen_tui.backends.sim import LengthProfile
from tests.support.engine import make_config, run
from tests.support.polling import wait_until
from tests.support.records import read_records, record_lines, recount
from tests.support.runs import finish, run_args, spawn

SLOTS = 32
RATE = 1500.0


async def test_back_to_back_datasets_keep_the_server_full(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Three datasets back to back in one pool: the next one fills the slots the one before
    leaves as it tapers, so the server never empties between them. Requests are kept queued
    beyond the server's 8 slots, as on a real server, so a slot never waits for the client's
    round trip between one answer and the next. How close to the server's capacity this
    comes is a benchmark's question (BENCHMARKS.md, saturation), not this test's.
    """
    slots, rate, budget = 8, 6000.0, 100_000
    profiles = {name: LengthProfile(mean=150) for name in "ABC"}
    server = await sim(tokens_per_s=rate, slots=slots, profiles=profiles)
    prompts = prompts_dir(A=2000, B=2000, C=2000)
    budgets = {name: (budget, None) for name in "ABC"}

    pooled = make_config(
        tokenizer_dir,
        prompts,
        tmp_path / "pooled",
        [server.url],
        budgets=budgets,
        concurrency=2 * slots,
        sampling={"max_new_tokens": 600},
    )
    final, _, _ = await run(pooled)
    assert all(d.state is DatasetState.DONE for d in final.datasets)
    for name in "ABC":
        assert 0 <= recount(tmp_path / "pooled" / name)[0] - budget < 0.01 * budget
    # The hand-off, as behaviour rather than a stopwatch (a loaded machine slows both): each
    # next dataset's answers start landing while the one before still has answers coming,
    # and the client kept its slots full (in flight, server-side queue included) throughout.
    spans = {
        name: (min(created), max(created))
        for name in "ABC"
        if (created := [r["created"] for r in read_records(tmp_path / "pooled" / name)])
    }
    for before, after in ("AB", "BC"):
        assert spans[after][0] < spans[before][1], (before, after, spans)
    assert final.utilisation > 0.9, final.utilisation
    tokens = sum(recount(tmp_path / "pooled" / name)[0] for name in "ABC")
    print(f"ideal {tokens / (slots * rate):.2f}s pooled {final.active_s:.2f}s")


async def test_parallel_datasets_share_the_slots(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=2000, slots=SLOTS)
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=80, B=80, C=80),
        tmp_path / "out",
        [server.url],
        concurrency=16,
        parallel_datasets=2,
    )
    _, _, snapshots = await run(config)
    both = [s for s in snapshots if s.datasets[0].inflight and s.datasets[1].inflight]
    assert both, "A and B never ran together"
    assert all(
        s.datasets[2].inflight == 0
        for s in snapshots
        if not s.datasets[0].state.finished
        and not s.datasets[1].state.finished
        and s.datasets[0].samples + s.datasets[0].inflight < 80
        and s.datasets[1].samples + s.datasets[1].inflight < 80
    )
    assert [recount(tmp_path / "out" / name)[1] for name in "ABC"] == [80, 80, 80]


@pytest.mark.parametrize("short", ["A", "C"], ids=["short-first", "short-last"])
async def test_total_budget_is_shared_and_a_short_dataset_hands_its_share_on(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path, short: str
) -> None:
    """Short last, with long answers: the others reach their first shares while its last
    answers still run. They get the rest of the total as soon as it has sent its last
    prompt, so the pool stays full instead of emptying while those answers run (and once
    it has run out, nothing waits forever: the run once did, with nothing in flight)."""
    profiles = {name: LengthProfile(mean=1500 if name == short else 300) for name in "ABC"}
    server = await sim(tokens_per_s=5000, slots=SLOTS, profiles=profiles)
    prompts = prompts_dir(**{name: 20 if name == short else 900 for name in "ABC"})
    config = make_config(
        tokenizer_dir,
        prompts,
        tmp_path / "out",
        [server.url],
        concurrency=16,
        max_total_tokens=300_000,
    )
    final, events, snapshots = await asyncio.wait_for(run(config), 60)
    # At most its first share and its last: never woken for less than an answer, to finish
    # again at once, as the shares move while the short one's last answers arrive.
    finishes = [text for kind, text in events if kind == "budget-event" and "done at" in text]
    assert all(sum(t.startswith(f"{n}:") for t in finishes) <= 2 for n in "ABC"), finishes
    full = next(i for i, s in enumerate(snapshots) if s.inflight == config.concurrency)
    before_the_end = [s for s in snapshots[full:] if s.tokens < 0.95 * 300_000]
    assert before_the_end
    assert min(s.inflight for s in before_the_end) >= config.concurrency // 2
    by_name = {d.name: d for d in final.datasets}
    few = by_name.pop(short)
    assert few.state is DatasetState.EXHAUSTED and few.samples == 20
    share = (300_000 - few.tokens) // 2
    for snap in by_name.values():
        assert snap.max_tokens == share
        assert snap.state is DatasetState.DONE
        assert share <= recount(tmp_path / "out" / snap.name)[0] < share * 1.05
    assert 300_000 <= sum(d.tokens for d in final.datasets) < 300_000 * 1.02


async def test_weights_and_caps_shape_the_split(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=10_000, slots=SLOTS)
    prompts = prompts_dir(A=900, B=900, C=900)
    config = make_config(
        tokenizer_dir,
        prompts,
        tmp_path / "out",
        [server.url],
        concurrency=8,
        max_total_tokens=300_000,
    )
    config.datasets = [
        DatasetSpec("A", prompts / "A.jsonl", max_tokens=50_000),
        DatasetSpec("B", prompts / "B.jsonl", weight=2.0),
        DatasetSpec("C", prompts / "C.jsonl"),
    ]
    final, _, _ = await run(config)
    assert [d.max_tokens for d in final.datasets] == [50_000, 166_666, 83_333]
    for snap in final.datasets:
        assert snap.max_tokens is not None
        tokens = recount(tmp_path / "out" / snap.name)[0]
        assert snap.max_tokens <= tokens < snap.max_tokens * 1.05


async def test_kill_and_resume_with_a_total_budget(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    profiles = {name: LengthProfile(mean=300) for name in "AB"}
    server = await sim(tokens_per_s=1500, slots=SLOTS, profiles=profiles)
    out = tmp_path / "out"
    args = run_args(
        tokenizer_dir,
        prompts_dir(A=800, B=800),
        out,
        server.url,
        "--max-total-tokens",
        "120k",
        "--parallel-datasets",
        "2",
        "--concurrency",
        "16",
    )
    process = await spawn(*args)
    await wait_until(lambda: record_lines(out / "A") + record_lines(out / "B") >= 60)
    os.kill(process.pid, signal.SIGKILL)
    await process.wait()
    code, stdout, stderr = await finish(await spawn(*args))
    assert code == 0, stderr
    assert "resuming with" in stdout, stdout
    totals = [recount(out / name)[0] for name in "AB"]
    for tokens in totals:
        assert 60_000 <= tokens < 60_000 * 1.05, stdout
    # The log says where the run ended against the total and how full the pool was, and
    # each dataset's progress.json tells the whole pool's story.
    summary = [line for line in stdout.splitlines() if " summary: " in line]
    assert len(summary) == 1, stdout
    assert f"{sum(totals):,}/120,000 (+" in summary[0] and "pool utilisation" in summary[0]
    assert "status: pool: " in stdout
    for name in "AB":
        pool = json.loads((out / name / "progress.json").read_text())["pool"]
        assert pool["states"] == {"A": "done", "B": "done"}
        assert pool["max_total_tokens"] == 120_000 and pool["tokens"] == sum(totals)
        assert 0 < pool["utilisation"] <= 1


async def test_a_budget_set_mid_run_holds_and_the_others_share_the_rest(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """`r` on a dataset of a run with a total budget: what the user set is its budget (not
    capped at its share), and the others' shares shrink so that the total still holds."""
    profiles = {name: LengthProfile(mean=300) for name in "AB"}
    server = await sim(tokens_per_s=5000, slots=SLOTS, profiles=profiles)
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=900, B=900),
        tmp_path / "out",
        [server.url],
        concurrency=16,
        parallel_datasets=2,
        max_total_tokens=200_000,
    )
    pinned: list[int] = []

    def on_snapshot(snapshot: RunSnapshot) -> None:  # on the engine's loop, as `r` runs it
        if not pinned and snapshot.datasets[0].tokens > 5_000:
            pinned.append(snapshot.datasets[0].tokens)
            engine.set_budget("A", 150_000, None)

    engine = Engine(config, on_snapshot=on_snapshot)
    final = await asyncio.wait_for(engine.run(), 60)
    assert pinned
    a, b = final.datasets
    assert (a.max_tokens, b.max_tokens) == (150_000, 50_000)
    assert 150_000 <= recount(tmp_path / "out" / "A")[0] < 150_000 * 1.05
    assert 50_000 <= recount(tmp_path / "out" / "B")[0] < 50_000 * 1.05


def test_a_dataset_started_again_alone_runs_to_the_budget_given(tmp_path: Path) -> None:
    """`r` on a finished dataset of a configured run with a total budget starts it alone:
    to the budget the user typed, not to a share of the old total (10M must not stop at
    the total's 1.5M)."""
    config = EngineConfig(
        datasets=[DatasetSpec(n, tmp_path / f"{n}.jsonl") for n in ("B1", "B2", "B3")],
        server_urls=["http://127.0.0.1:1"],
        tokenizer="",
        output_dir=tmp_path,
        max_total_tokens=1_500_000,
    )
    alone = only_dataset(config, "B2", (10_000_000, None))
    assert [d.name for d in alone.datasets] == ["B2"]
    assert alone.datasets[0].max_tokens == 10_000_000 and alone.max_total_tokens is None


def test_a_configured_run_plans_each_share_before_it_starts(tmp_path: Path) -> None:
    """What the panels show before `s`: each dataset's own budget, or its share of the
    total (by weight, within its own cap)."""
    specs = [
        DatasetSpec("B1", tmp_path / "B1.jsonl"),
        DatasetSpec("B2", tmp_path / "B2.jsonl", weight=2),
        DatasetSpec("B3", tmp_path / "B3.jsonl", max_tokens=100_000),
    ]
    config = EngineConfig(datasets=specs, server_urls=[], tokenizer="", output_dir=tmp_path)
    assert ConfigSource(config).planned == {"B1": None, "B2": None, "B3": 100_000}
    config.max_total_tokens = 1_000_000
    assert ConfigSource(config).planned == {"B1": 300_000, "B2": 600_000, "B3": 100_000}
