"""Scale: 1, 2 and 4 simulated servers behind a real sglang-router, the same budget each.

The question a user past one GPU box asks: does the rate grow with the servers, and does
the budget still hold? Each server count runs twice, side by side in one run: through the
router (one URL) and with the same servers named by repeated `--server-url` (the engine
spreads requests itself, least busy first). The rate is the budget over the time from the
first dispatch to the budget's crossing (the tail where the last answers finish alone is
the same few seconds for every count, and is the budget's business, not the servers').

The engine's own CPU per request is measured too (the simulators and the router run in
processes of their own), which says how many servers one client core could keep busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import shutil
import time

from bench.common import CACHE, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.engine import Engine
from gen_tui.backends.run_config import DatasetSpec, EngineConfig, queued_concurrency
from gen_tui.backends.snapshot import BudgetEvent, RunSnapshot
from tests.support.router import router_problem, start_router

SLOTS = 32
MEAN = 2000
SERVERS = (1, 2, 4)
TARGET = 0.9
"""Each count's rate at least this share of the single server's rate times the count."""
OVERSHOOT_FLOOR = 0.005
"""Overshoot below this share of the budget counts as within the single server's figure:
below it, which answers happen to be in flight at the crossing decides, not the count."""
B2_MEAN, GPU_TOKENS_S = 3793, 20_000
"""A B2-like answer length and a generous rate for one real SGLang server, for the note."""


COLUMNS = ("servers", "way", "tok/s to budget", "vs 1 server x N", "overshoot", "CPU ms/req")
COLUMNS += ("target",)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def one(urls: list[str], workers: int, budget: int, count: int, label: str) -> dict:
    """One budgeted run over `urls` (`workers` servers behind them): rate, overshoot, CPU."""
    output = CACHE / "out-scale" / label
    shutil.rmtree(output, ignore_errors=True)
    first: list[float] = []
    crossed: list[float] = []

    def snapshot(snap: RunSnapshot) -> None:
        if not first and snap.inflight:
            first.append(time.monotonic() - snap.active_s)

    def budget_event(event: BudgetEvent) -> None:
        if event.kind == "crossed" and not crossed:
            crossed.append(time.monotonic())

    config = EngineConfig(
        datasets=[DatasetSpec("A", prompts("A", count), budget)],
        server_urls=urls,
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=queued_concurrency(SLOTS * workers),
        sampling={"max_new_tokens": 8192},
        snapshot_interval_s=0.05,
    )
    started = cpu_s()
    final = await Engine(config, on_snapshot=snapshot, on_budget=budget_event).run()
    cpu = cpu_s() - started
    tokens, samples = final.datasets[0].tokens, final.datasets[0].samples
    seconds = (crossed[0] if crossed else time.monotonic()) - first[0]
    return {
        "rate": budget / seconds,
        "over": (tokens - budget) / budget,
        "cpu_ms": 1000 * cpu / max(1, samples),
    }


async def measure(budget: int, count: int, per_slot: float) -> dict[tuple[str, int], dict]:
    """Every (way, server count) pair, on the same simulators started once."""
    results: dict[tuple[str, int], dict] = {}
    flags = ("--slots", str(SLOTS), "--tokens-per-s", str(per_slot))
    flags += ("--default-mean", str(MEAN), "--seed", "1")
    with contextlib.ExitStack() as servers:
        urls = [servers.enter_context(simulator(*flags)) for _ in range(max(SERVERS))]
        for n in SERVERS:
            log = CACHE / f"router-{n}.log"
            async with start_router(urls[:n], log) as url:
                results["router", n] = await one([url], n, budget, count, f"router-{n}")
            results["direct", n] = await one(urls[:n], n, budget, count, f"direct-{n}")
    return results


def run(smoke: bool, write: bool) -> bool:
    budget, count, per_slot = (300_000, 1500, 1000.0) if smoke else (1_600_000, 6000, 1000.0)
    server_rate = SLOTS * per_slot
    table = Table(
        "scale",
        f"Scale behind sglang-router ({budget:,}-token budget, servers of {SLOTS} slots x "
        f"{per_slot:g} tok/s, mean {MEAN})",
        f"python -m bench scale{' --smoke' if smoke else ''}",
        COLUMNS,
    )
    problem = router_problem()
    if problem:
        print(f"scale: skipped: {problem}")
        return True
    results = asyncio.run(measure(budget, count, per_slot))
    ok = True
    for n in SERVERS:
        for way in ("router", "direct"):
            result, single = results[way, n], results[way, 1]
            linear = result["rate"] / (single["rate"] * n)
            over_ok = result["over"] <= max(single["over"], OVERSHOOT_FLOOR)
            met = linear >= TARGET and over_ok
            if way == "router":
                ok = ok and met
            table.add(
                n,
                "router" if way == "router" else "repeated --server-url",
                f"{result['rate']:,.0f}",
                f"{linear:.2f}x",
                f"{result['over']:+.2%}",
                f"{result['cpu_ms']:.2f}",
                f">= {TARGET}x, overshoot <= 1 server's: {verdict(met)}" if n > 1 else "(baseline)",
            )
    cpu_ms = max(result["cpu_ms"] for result in results.values())
    per_core = 1000 / cpu_ms
    table.notes.append(
        f"Ideal: {server_rate:,.0f} tok/s a server. Same simulators for both ways, started "
        "once; the router runs `--policy round_robin`, and the concurrency keeps a queue at "
        f"each server (`queued_concurrency`). The client spent at most {cpu_ms:.2f} ms of CPU "
        f"a request, so one core sends about {per_core:,.0f} requests/s: at this bench's "
        f"{server_rate / MEAN:,.0f} requests/s a server it would be the bottleneck past about "
        f"{per_core * MEAN / server_rate:,.0f} servers; with B2-like answers ({B2_MEAN:,} "
        f"tokens) on servers doing {GPU_TOKENS_S:,} tok/s, past about "
        f"{per_core * B2_MEAN / GPU_TOKENS_S:,.0f}."
    )
    publish(table, write)
    return ok
