"""Budget precision: overshoot and time to budget of drain, predictive, strict and precise.

Alone, a dataset that stops at its budget without truncating answers must let its pool
empty at the end: that is the price of precision, and the rate column shows it. In a pool
(the default), the slots a tapering dataset frees go to the next dataset, so the server's
rate need not drop; the pooled rows measure that, B2 with B3 behind it in one pool.
"""

from __future__ import annotations

import asyncio
import shutil
import time

from bench.common import SCRATCH, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import BudgetEvent, RunSnapshot

NAME = "B2_opencodeinstruct"
NEXT = "B3_sharegpt"


async def one(
    url: str, mode: BudgetMode, budget: int, concurrency: int, count: int, pooled: bool
) -> dict:
    output = SCRATCH / "out-precision" / f"{mode.value}{'-pooled' if pooled else ''}"
    shutil.rmtree(output, ignore_errors=True)
    first: list[float] = []
    crossed: list[float] = []
    finished: list[tuple[float, int]] = []

    def snapshot(snap: RunSnapshot) -> None:
        if not first and snap.inflight:
            first.append(time.monotonic() - snap.active_s)

    def budget_event(event: BudgetEvent) -> None:
        if event.dataset != NAME:
            return
        if event.kind == "crossed" and not crossed:
            crossed.append(time.monotonic())
        if event.kind in ("done", "exhausted") and pooled and not finished:
            finished.append((time.monotonic(), sum(d.tokens for d in engine.snapshot().datasets)))
            engine.request_stop()
            engine.request_stop()  # the next dataset's answers in flight are not measured

    datasets = [DatasetSpec(NAME, prompts(NAME, count), budget)]
    if pooled:
        datasets.append(DatasetSpec(NEXT, prompts(NEXT, count)))
    config = EngineConfig(
        datasets=datasets,
        server_urls=[url],
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=concurrency,
        sampling={"max_new_tokens": 16384},
        budget_mode=mode,
        snapshot_interval_s=0.05,
    )
    engine = Engine(config, on_snapshot=snapshot, on_budget=budget_event)
    final = await engine.run()
    tokens = final.datasets[0].tokens
    if pooled:
        done_at, pool_tokens = finished[0]
        seconds, rate = done_at - first[0], pool_tokens / (done_at - first[0])
    else:
        seconds = (crossed[0] if crossed else time.monotonic()) - first[0]
        rate = budget / seconds
    return {"tokens": tokens, "over": tokens - budget, "seconds": seconds, "rate": rate}


def run(smoke: bool, write: bool) -> bool:
    budget, concurrency, count = (1_000_000, 16, 1000) if smoke else (10_000_000, 150, 6000)
    per_slot = 20_000.0 if smoke else 2000.0
    modes = (BudgetMode.DRAIN, BudgetMode.PREDICTIVE, BudgetMode.STRICT, BudgetMode.PRECISE)
    results: dict[tuple[BudgetMode, bool], dict] = {}
    with simulator(
        "--slots",
        str(concurrency),
        "--tokens-per-s",
        str(per_slot),
        "--profile",
        f"{NAME}=3793",
        "--profile",
        f"{NEXT}=1500",
        "--seed",
        "1",
    ) as url:
        for pooled in (False, True):
            for mode in modes:
                results[mode, pooled] = asyncio.run(
                    one(url, mode, budget, concurrency, count, pooled)
                )
    table = Table(
        "budget_precision",
        f"Budget precision ({budget:,} tokens, concurrency {concurrency}, B2-like lengths)",
        f"python -m bench budget_precision{' --smoke' if smoke else ''}",
        ["mode", "final tokens", "overshoot", "time", "rate vs drain", "target"],
    )
    ok = True
    for (mode, pooled), result in results.items():
        over = result["over"] / budget
        rate = result["rate"] / results[BudgetMode.DRAIN, pooled]["rate"]
        if mode is BudgetMode.PREDICTIVE:
            met = over <= 0.002 and rate >= 0.95
            target = "<= 0.2% over, >= 0.95x drain's rate"
        elif mode is BudgetMode.STRICT:
            met = result["tokens"] <= budget
            target = "never over"
        elif mode is BudgetMode.PRECISE:
            # Issue 18: within 0.2% either side, alone at no less than 0.73x drain's rate.
            met = abs(over) <= 0.002 and (pooled or rate >= 0.73)
            target = "within 0.2% either side" + ("" if pooled else ", >= 0.73x drain's rate")
        else:
            met, target = True, "(baseline)"
        if not pooled or mode in (BudgetMode.PREDICTIVE, BudgetMode.PRECISE):
            ok = ok and met
        table.add(
            f"{mode.value}, {'B2 then B3 in one pool' if pooled else 'alone'}",
            f"{result['tokens']:,}",
            f"{over:+.3%}",
            f"{result['seconds']:.1f} s",
            f"{rate:.2f}x",
            f"{target}: {verdict(met)}" if mode is not BudgetMode.DRAIN else target,
        )
    table.notes.append(
        f"Simulator: {concurrency} slots x {per_slot:g} tok/s, lognormal lengths (B2 mean "
        "3,793, B3 mean 1,500, cv 0.95), max_new_tokens 16384. Alone: time runs from the "
        "first dispatch until the committed total reaches the budget (strict and precise: until "
        "it stops), and the rate is the budget over that time. In one pool: time runs until B2 "
        "has finished (its last answer in), and the rate is every token the pool wrote by "
        "then, B2's and B3's, over that time: the server's rate while B2 tapers."
    )
    publish(table, write)
    return ok
