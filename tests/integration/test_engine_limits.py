"""Where an engine run stops and who gets the slots: every prompt when nothing limits it, a
token budget kept as each budget mode promises (strict never over, drain past it, predictive
just past it), max_samples exactly, and datasets sharing one pool in priority order.

The engine in-process against the simulator on loopback, with a real tokenizer; every count
is checked against a recount of the record files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.sim import LengthProfile
from tests.support.engine import make_config, run
from tests.support.records import progress, read_records, recount


async def test_runs_all_prompts_and_writes_records(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    config = make_config(tokenizer_dir, prompts_dir(A=40, B=25), tmp_path / "out", [server.url])
    final, _, snapshots = await run(config)
    assert [d.state for d in final.datasets] == [DatasetState.EXHAUSTED] * 2
    for name, expected in (("A", 40), ("B", 25)):
        tokens, records = recount(tmp_path / "out" / name)
        assert records == expected
        snap = progress(tmp_path / "out" / name)
        assert (snap["tokens"], snap["samples"], snap["state"]) == (tokens, records, "exhausted")
        first = read_records(tmp_path / "out" / name)[0]
        assert {
            "sample_id",
            "output_ids",
            "prompt_tokens",
            "completion_tokens",
            "finish_reason",
        } <= set(first)
    assert server.stats.completed == 65
    assert snapshots, "the engine published no snapshots"


# Precise may end short of its budget by design: tests/integration/test_precise_mode.py.
@pytest.mark.quick
@pytest.mark.parametrize("mode", [mode for mode in BudgetMode if mode is not BudgetMode.PRECISE])
async def test_budget_modes(
    mode: BudgetMode,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(profiles={"A": LengthProfile(mean=400)}, tokens_per_s=20000, slots=64)
    budget = 200_000
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=1500),
        tmp_path / "out",
        [server.url],
        budgets={"A": (budget, None)},
        budget_mode=mode,
        concurrency=48,
        sampling={"max_new_tokens": 1500},
    )
    final, events, _ = await run(config)
    tokens, _ = recount(tmp_path / "out" / "A")
    assert final.datasets[0].tokens == tokens
    assert progress(tmp_path / "out" / "A")["tokens"] == tokens
    assert final.datasets[0].state is DatasetState.DONE
    if mode is BudgetMode.STRICT:
        assert budget - 1500 < tokens <= budget
    else:
        assert tokens >= budget
    if mode is BudgetMode.PREDICTIVE:
        assert tokens - budget < budget * 0.02, f"predictive overshot by {tokens - budget}"
    assert any("budget reached" in message for _, message in events)
    assert any(level == "budget-event" and ": done at" in m for level, m in events)
    crossed = any(level == "budget-event" and ": crossed at" in m for level, m in events)
    assert crossed == (mode is not BudgetMode.STRICT)  # strict never reaches the budget


async def test_drain_overshoots_more_than_predictive(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(profiles={"A": LengthProfile(mean=400)}, tokens_per_s=20000, slots=64)
    prompts = prompts_dir(A=600)
    overshoot = {}
    for mode in (BudgetMode.DRAIN, BudgetMode.PREDICTIVE):
        config = make_config(
            tokenizer_dir,
            prompts,
            tmp_path / mode.value,
            [server.url],
            budgets={"A": (20_000, None)},
            budget_mode=mode,
            concurrency=48,
        )
        await run(config)
        overshoot[mode] = recount(tmp_path / mode.value / "A")[0] - 20_000
    assert overshoot[BudgetMode.DRAIN] > overshoot[BudgetMode.PREDICTIVE]


async def test_max_samples_is_exact(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=100),
        tmp_path / "out",
        [server.url],
        budgets={"A": (None, 37)},
    )
    await run(config)
    assert recount(tmp_path / "out" / "A")[1] == 37
    assert server.stats.completed == 37


async def test_datasets_share_one_pool_in_priority_order(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=3000, slots=64)
    config = make_config(
        tokenizer_dir, prompts_dir(A=80, B=80), tmp_path / "out", [server.url], concurrency=16
    )
    _, _, snapshots = await run(config)
    assert any(s.datasets[1].inflight for s in snapshots), "B never ran alongside A"
    for snap in snapshots:
        first, second = snap.datasets
        assert snap.inflight <= 16
        if second.inflight:
            assert first.samples + first.inflight == 80, "B took a slot A could have used"
    assert [recount(tmp_path / "out" / name)[1] for name in "AB"] == [80, 80]
