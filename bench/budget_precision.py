"""Budget precision: overshoot and time to budget of drain, predictive and strict."""

from __future__ import annotations

import asyncio
import shutil
import time

from bench.common import CACHE, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.budget import BudgetMode
from gen_tui.backends.engine import Engine
from gen_tui.backends.run_config import DatasetSpec, EngineConfig

NAME = "B2_opencodeinstruct"


async def one(url: str, mode: BudgetMode, budget: int, concurrency: int, count: int) -> dict:
    output = CACHE / "out-precision" / mode.value
    shutil.rmtree(output, ignore_errors=True)
    crossed: list[float] = []
    first: list[float] = []

    def event(level: str, message: str) -> None:
        if "crossed its budget" in message or "budget reached" in message:
            crossed.append(time.monotonic())

    def snapshot(snap: object) -> None:
        if not first and getattr(snap, "inflight", 0):
            first.append(time.monotonic())

    config = EngineConfig(
        datasets=[
            DatasetSpec("B2_opencodeinstruct", prompts("B2_opencodeinstruct", count), budget)
        ],
        server_urls=[url],
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=concurrency,
        sampling={"max_new_tokens": 16384},
        budget_mode=mode,
        snapshot_interval_s=0.05,
    )
    final = await Engine(config, on_snapshot=snapshot, on_event=event).run()
    tokens = final.datasets[0].tokens
    to_budget = (crossed[0] if crossed else time.monotonic()) - first[0]
    return {
        "tokens": tokens,
        "over": tokens - budget,
        "seconds": to_budget,
        "active": final.active_s,
    }


def run(smoke: bool, write: bool) -> bool:
    budget, concurrency, count = (1_000_000, 16, 1000) if smoke else (10_000_000, 150, 6000)
    per_slot = 20_000.0 if smoke else 2000.0
    results = {}
    with simulator(
        "--slots",
        str(concurrency),
        "--tokens-per-s",
        str(per_slot),
        "--profile",
        "B2_opencodeinstruct=3793",
        "--seed",
        "1",
    ) as url:
        for mode in (BudgetMode.DRAIN, BudgetMode.PREDICTIVE, BudgetMode.STRICT):
            results[mode] = asyncio.run(one(url, mode, budget, concurrency, count))
    drain_rate = budget / results[BudgetMode.DRAIN]["seconds"]
    table = Table(
        "budget_precision",
        f"Budget precision ({budget:,} tokens, concurrency {concurrency}, B2-like lengths)",
        f"python -m bench budget_precision{' --smoke' if smoke else ''}",
        ["mode", "final tokens", "overshoot", "time to budget", "rate vs drain", "target"],
    )
    ok = True
    for mode, result in results.items():
        over = result["over"] / budget
        rate = (budget / result["seconds"]) / drain_rate
        if mode is BudgetMode.PREDICTIVE:
            met = over <= 0.002 and rate >= 0.95
            target = "<= 0.2% over, >= 0.95x drain's rate"
        elif mode is BudgetMode.STRICT:
            met = result["tokens"] <= budget
            target = "never over"
        else:
            met, target = True, "(baseline)"
        ok = ok and met
        table.add(
            mode.value,
            f"{result['tokens']:,}",
            f"{over:+.3%}",
            f"{result['seconds']:.1f} s",
            f"{rate:.2f}x",
            f"{target}: {verdict(met)}" if mode is not BudgetMode.DRAIN else target,
        )
    table.notes.append(
        f"Simulator: {concurrency} slots x {per_slot:g} tok/s, lognormal lengths (mean 3,793, "
        "cv 0.95), max_new_tokens 16384. Time to budget runs from the first dispatch until the "
        "committed total reaches the budget (strict: until it stops)."
    )
    publish(table, write)
    return ok
