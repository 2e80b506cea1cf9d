"""The total-budget allocator in memory: shares, hand-ons, pinned budgets, reopening."""

from __future__ import annotations

from pathlib import Path

from gen_tui.backends.budget.rules import Budget
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine.allocator import Allocator, settled_tokens
from gen_tui.backends.engine.context import RunContext
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.engine.signals import RunSignals
from gen_tui.backends.progress.snapshot import DatasetState


def allocator(
    tmp_path: Path, total: int | None, weights: dict[str, float], **overrides: object
) -> tuple[Allocator, dict[str, DatasetRun], list[str], list[str]]:
    """An allocator over datasets named by `weights`, with the events and reopens it made."""
    specs = [DatasetSpec(n, tmp_path / f"{n}.jsonl", weight=w) for n, w in weights.items()]
    config = EngineConfig(
        datasets=specs,
        server_urls=["scripted://"],
        tokenizer="",
        output_dir=tmp_path,
        max_total_tokens=total,
        sampling={"max_new_tokens": 100},
        **overrides,  # type: ignore[arg-type]
    )
    runs = [DatasetRun(spec, tmp_path / spec.name, 100.0) for spec in specs]
    for ds in runs:
        ds.state = DatasetState.WAITING
    events: list[str] = []
    reopened: list[str] = []
    reporter = Reporter(lambda _level, text: events.append(text), None, lambda: None)
    run = RunContext(config, runs, RunSignals(), reporter)
    alloc = Allocator(run, lambda ds: reopened.append(ds.name))
    return alloc, {ds.name: ds for ds in runs}, events, reopened


def test_the_total_is_split_by_weight(tmp_path: Path) -> None:
    alloc, ds, _, _ = allocator(tmp_path, 1000, {"A": 1.0, "B": 3.0})
    alloc.rebalance()
    assert (ds["A"].budget.max_tokens, ds["B"].budget.max_tokens) == (250, 750)


def test_without_a_total_budgets_are_left_alone(tmp_path: Path) -> None:
    alloc, ds, _, _ = allocator(tmp_path, None, {"A": 1.0, "B": 1.0})
    alloc.rebalance()
    assert ds["A"].budget == Budget() and ds["B"].budget == Budget()


def test_a_short_dataset_hands_its_share_on(tmp_path: Path) -> None:
    alloc, ds, events, _ = allocator(tmp_path, 1000, {"A": 1.0, "B": 1.0})
    alloc.rebalance()
    ds["A"].state = DatasetState.EXHAUSTED
    ds["A"].tokens = 100
    alloc.hand_on(ds["A"])
    assert ds["B"].budget.max_tokens == 900
    assert ds["A"].budget.max_tokens == 500  # its own share is not rewritten: it is settled
    assert events == ["A: 400 tokens of its 500 share unused; the total's shares are now B 900"]


def test_settled_tokens_are_the_exhausted_count_and_the_pinned_budget(tmp_path: Path) -> None:
    _, ds, _, _ = allocator(tmp_path, 1000, {"A": 1.0, "B": 1.0, "C": 1.0})
    ds["A"].state = DatasetState.EXHAUSTED
    ds["A"].tokens = 42
    ds["B"].pinned = True
    ds["B"].budget = Budget(700)
    ds["C"].tokens = 10
    assert settled_tokens(list(ds.values()), 0.0) == {"A": 42, "B": 700}


def test_a_budget_set_mid_run_holds_and_the_others_share_the_rest(tmp_path: Path) -> None:
    alloc, ds, events, _ = allocator(tmp_path, 1000, {"A": 1.0, "B": 1.0, "C": 1.0})
    alloc.rebalance()
    alloc.set_budget("A", 700, None)
    assert ds["A"].pinned
    assert [ds[n].budget.max_tokens for n in "ABC"] == [700, 150, 150]
    assert events[-1] == "A: budget set to 700 tokens"


def test_a_dataset_done_at_its_share_is_reopened_only_with_room_for_an_answer(
    tmp_path: Path,
) -> None:
    """The prior mean answer is 100 tokens: 50 more is not worth waking it for, 400 is."""
    alloc, ds, _, reopened = allocator(tmp_path, 1000, {"A": 1.0, "B": 1.0})
    alloc.rebalance()
    ds["B"].state = DatasetState.DONE
    ds["B"].tokens = 500
    ds["A"].state = DatasetState.EXHAUSTED
    ds["A"].tokens = 450
    alloc.hand_on(ds["A"])
    assert ds["B"].budget.max_tokens == 550
    assert ds["B"].state is DatasetState.DONE and reopened == []
    ds["A"].tokens = 100
    alloc.rebalance()
    assert ds["B"].budget.max_tokens == 900
    assert ds["B"].state is DatasetState.WAITING and reopened == ["B"]


def test_a_budget_given_as_a_float_is_kept_whole(tmp_path: Path) -> None:
    """Issue 31, defect 18: a budget from the panel or the demo's scaling may come as a
    float; no line then says `200,000.0`."""
    alloc, ds, events, _ = allocator(tmp_path, None, {"A": 1.0})
    alloc.set_budget("A", 200_000.0, 1.0)  # type: ignore[arg-type]
    assert events[-1] == "A: budget set to 200,000 tokens, 1 sample"
    budget = ds["A"].budget
    assert type(budget.max_tokens) is int and type(budget.max_samples) is int
