"""Precise mode over the simulator: a dataset that stops short of its budget is done, says
"no room for one more", and tells its user as a crossing would (budget event and alert).

Answers are all 400 tokens long (the simulator's profile with no spread), so where the run
ends follows from the rule alone: with fewer than ten answers back a last answer goes out
only with room for three mean answers less the one it may pass by (`precise.lone_room`),
so a 2,300 budget ends at 1,600 or 2,000, never past it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.alerts import AlertEvent
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import BudgetEvent, DatasetState
from gen_tui.backends.sim import LengthProfile
from tests.support.engine import make_config
from tests.support.records import progress, recount

BUDGET = 2300
LENGTH = 400


def one_dataset(
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    tmp_path: Path,
    url: str,
    mode: BudgetMode,
) -> Any:
    """Dataset A: 50 prompts, a BUDGET-token budget in `mode`, 16 slots, a 1,500 cap."""
    return make_config(
        tokenizer_dir,
        prompts_dir(A=50),
        tmp_path / "out",
        [url],
        budgets={"A": (BUDGET, None)},
        budget_mode=mode,
        concurrency=16,
        sampling={"max_new_tokens": 1500},
    )


async def run_precise(config: Any) -> tuple[Any, list[BudgetEvent], list[str], list[str]]:
    budgets: list[BudgetEvent] = []
    alerts: list[str] = []
    events: list[str] = []
    engine = Engine(
        config,
        on_event=lambda level, message: events.append(message),
        on_budget=budgets.append,
        on_alert=lambda event, message: alerts.append(f"{event}: {message}"),
    )
    return await engine.run(), budgets, alerts, events


async def test_a_precise_run_that_stops_short_is_done_and_announced(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(profiles={"A": LengthProfile(mean=LENGTH, cv=0.0)}, tokens_per_s=20000)
    config = one_dataset(tokenizer_dir, prompts_dir, tmp_path, server.url, BudgetMode.PRECISE)
    final, budgets, alerts, events = await run_precise(config)
    (done,) = final.datasets
    assert done.state is DatasetState.DONE
    assert recount(tmp_path / "out" / "A") == (done.tokens, done.samples)
    assert done.tokens in (1600, 2000), done.tokens
    assert "no room for one more" in done.message
    assert any("A: budget reached" in m and "no room for one more" in m for m in events)
    assert [(e.kind, e.tokens, e.max_tokens) for e in budgets] == [("done", done.tokens, BUDGET)]
    assert len(alerts) == 1 and str(AlertEvent.BUDGET) in alerts[0], alerts
    assert f"{done.tokens:,} of {BUDGET:,} tokens" in alerts[0]
    assert progress(tmp_path / "out" / "A")["budget_mode"] == "precise"

    # Resumed at the same budget it is already done: nothing sent, nothing announced again.
    served = server.stats.completed
    again, budgets, alerts, events = await run_precise(config)
    assert again.datasets[0].state is DatasetState.DONE
    assert again.datasets[0].tokens == done.tokens
    assert server.stats.completed == served
    assert budgets == [] and alerts == []
    assert any("already at its budget" in m for m in events)


async def test_a_strict_run_that_stops_short_alerts_as_a_crossing_would(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Strict reserves max_new_tokens per request, so it never crosses: its end, short of the
    budget, is the budget's moment, and the alert comes then (it used to come never)."""
    server = await sim(profiles={"A": LengthProfile(mean=LENGTH, cv=0.0)}, tokens_per_s=20000)
    config = one_dataset(tokenizer_dir, prompts_dir, tmp_path, server.url, BudgetMode.STRICT)
    final, budgets, alerts, _ = await run_precise(config)
    (done,) = final.datasets
    assert done.state is DatasetState.DONE and done.tokens <= BUDGET
    assert "strict: no room for one more" in done.message
    assert [(e.kind, e.tokens) for e in budgets] == [("done", done.tokens)]
    assert len(alerts) == 1 and f"{done.tokens:,} of {BUDGET:,} tokens" in alerts[0], alerts
