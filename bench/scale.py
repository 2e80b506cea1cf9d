"""Scale: 1, 2 and 4 simulated servers behind a real sglang-router, the same budget each.

The question a user past one GPU box asks: does the rate grow with the servers, and does
the budget still hold? Each server count runs twice, side by side in one run: through the
router (one URL) and with the same servers named by repeated `--server-url` (the engine
spreads requests itself, least busy first). The rate is the budget over the time from the
first dispatch to the budget's crossing, which comes at the end of the taper, when the last
long answers finish alone: a few seconds every run pays whatever its server count, so that
rate says as much about the budget's size as about the servers. The steady rate beside it
(bench/phases.py) is the servers' own.

The engine's own CPU per request is measured too, and the cores each process used (the
simulators and the router run in processes of their own, bench/cpu_share.py), which says
whether the machine or the client held a run back, and how many servers one client core
could keep busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import time

import psutil

from bench.common import CACHE, SCRATCH, Table, prompts, publish, simulator, tokenizer, verdict
from bench.cpu_share import CpuShare, describe
from bench.phases import STEADY, Sample, cut
from gen_tui.backends.config.run import DatasetSpec, EngineConfig, queued_concurrency
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import BudgetEvent, RunSnapshot
from tests.support.router import router_problem, start_router

SLOTS = 32
MEAN = 2000
SERVERS = (1, 2, 4)
TARGET = 0.9
"""Each count's rate at least this share of the single server's rate times the count."""
OVERSHOOT_FLOOR = 0.005
"""Overshoot below this share of the budget counts as within the single server's figure:
below it, which answers happen to be in flight at the crossing decides, not the count."""
BUDGET = 20_000_000
"""Twice a dataset's usual 10M. The ramp and the tail cost every run 7 to 10 s whatever its
budget (a little more with more servers): at 1.6M four servers (19 s to the budget) lost a
third of their time to them, at 6.4M (13 minutes of bench) a sixth, and the rate to the
budget read 0.84x to 0.87x for a steady 0.97x to 1.00x. 20M takes about 40 minutes."""
B2_MEAN, GPU_TOKENS_S = 3793, 20_000
"""A B2-like answer length and a generous rate for one real SGLang server, for the note."""


COLUMNS = ("servers", "way", "tok/s to budget", "vs 1 server x N")
COLUMNS += ("steady tok/s", "steady vs 1 x N", "slots full", "ramp + tail s")
COLUMNS += ("overshoot", "CPU ms/req", "target")


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def role(process: psutil.Process) -> str:
    """A child of this bench: the router or one of the simulators."""
    try:
        return "router" if "router" in " ".join(process.cmdline()) else "simulators"
    except psutil.Error:
        return "simulators"


def occupancy(snap: RunSnapshot) -> tuple[float | None, float | None]:
    """Requests running on all the servers (a router's workers), and the slots idle at one
    server while requests queue at another (None, None: no server said)."""
    loads = [
        worker.metrics
        for url in snap.servers
        for worker in snap.server_workers.get(url, ())
        if worker.metrics is not None
    ]
    loads += [m for url, m in snap.server_metrics.items() if url not in snap.server_workers and m]
    if not loads:
        return None, None
    running = [m.running or 0.0 for m in loads]
    idle = sum(max(0.0, SLOTS - r) for r in running)
    return sum(running), min(idle, sum(m.queued or 0.0 for m in loads))


async def one(urls: list[str], workers: int, budget: int, count: int, label: str) -> dict:
    """One budgeted run over `urls` (`workers` servers behind them): rate, overshoot, CPU,
    its phases and the cores each process used."""
    output = SCRATCH / "out-scale" / label
    shutil.rmtree(output, ignore_errors=True)
    first: list[float] = []
    crossed: list[float] = []
    samples: list[Sample] = []

    def snapshot(snap: RunSnapshot) -> None:
        now = time.monotonic()
        if not first and snap.inflight:
            first.append(now - snap.active_s)
        samples.append(Sample(now, snap.datasets[0].tokens, *occupancy(snap)))

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
        metrics_interval_s=0.25,
    )
    share = CpuShare(role)
    share.start()
    started = cpu_s()
    final = await Engine(config, on_snapshot=snapshot, on_budget=budget_event).run()
    cpu = cpu_s() - started
    share.stop()
    ended = time.monotonic()
    tokens, answers = final.datasets[0].tokens, final.datasets[0].samples
    crossing = crossed[0] if crossed else ended
    phases = cut(samples, first[0], crossing, budget, SLOTS * workers)
    return {
        "rate": budget / phases.to_budget_s,
        "over": (tokens - budget) / budget,
        "cpu_ms": 1000 * cpu / max(1, answers),
        "phases": phases,
        "end_s": ended - crossing,
        "cores": dict(share.cores),
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


def detail(result: dict) -> str:
    """Where one run's time went, and whose the CPU was: a line for the log, not the table."""
    phases = result["phases"]
    fill = "never" if phases.fill_s is None else f"{phases.fill_s:.2f} s"
    stranded = "?" if phases.stranded is None else f"{phases.stranded:.2%}"
    return (
        f"{phases.to_budget_s:.1f} s to budget; slots all full after {fill}; ramp "
        f"{phases.ramp_s:.1f} s, tail {phases.tail_s:.1f} s, then {result['end_s']:.1f} s "
        f"to the end; slots idle beside a queue {stranded}; cores: {describe(result['cores'])}"
    )


def notes(results: dict[tuple[str, int], dict], server_rate: float) -> list[str]:
    """What the columns mean, and the figures of this run beside them: the ramp, the CPU
    each process used, the router's spread against the client's."""
    low, high = (f"{share:.0%}" for share in STEADY)
    fill = max(r["phases"].fill_s or 0.0 for r in results.values())
    fixed = [r["phases"].ramp_s + r["phases"].tail_s for r in results.values()]
    cores = [r["cores"] for r in results.values()]
    client = max(c.get("client", 0.0) for c in cores)
    total = max(sum(c.values()) for c in cores)
    spread = {way: results[way, max(SERVERS)]["phases"].stranded for way in ("router", "direct")}
    cpu_ms = max(result["cpu_ms"] for result in results.values())
    per_core = 1000 / cpu_ms
    return [
        f"Ideal: {server_rate:,.0f} tok/s a server. Same simulators for both ways, started "
        "once; the router runs `--policy round_robin`, and the concurrency keeps a queue at "
        "each server (`queued_concurrency`). *Steady tok/s*: tokens on disk between "
        f"{low} and {high} of the budget over that time, the servers' own rate; *slots full*: "
        "their running requests over their slots in that stretch (their /metrics, read "
        "every 0.25 s); *ramp + tail*: the seconds a run took beyond its budget at its steady "
        f"rate, before {low} and after {high}. Every run had all its slots running within "
        f"{fill:.2f} s of its first dispatch; ramp and tail together cost each run "
        f"{min(fixed):.1f} to {max(fixed):.1f} s, whatever its server count.",
        "",
        f"Over a run, the client used at most {client:.2f} of a core, and every process of "
        f"the bench together {total:.2f} of {os.cpu_count()} cores. At {max(SERVERS)} "
        f"servers, slots stood idle while a request queued at another server for "
        f"{spread['router'] or 0:.2%} of the slot time through the router and "
        f"{spread['direct'] or 0:.2%} with repeated `--server-url`. The client spent at most "
        f"{cpu_ms:.2f} ms of CPU a request, so one core sends about {per_core:,.0f} "
        f"requests/s: at this bench's {server_rate / MEAN:,.0f} requests/s a server it would "
        f"be the bottleneck past about {per_core * MEAN / server_rate:,.0f} servers; with "
        f"B2-like answers ({B2_MEAN:,} tokens) on servers doing {GPU_TOKENS_S:,} tok/s, past "
        f"about {per_core * B2_MEAN / GPU_TOKENS_S:,.0f}.",
    ]


def run(smoke: bool, write: bool) -> bool:
    budget, per_slot = (300_000, 1000.0) if smoke else (BUDGET, 1000.0)
    count = 2 * budget // MEAN + 1000  # never out of prompts before the budget
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
            phases = result["phases"]
            linear = result["rate"] / (single["rate"] * n)
            steady = phases.steady_rate / (single["phases"].steady_rate * n)
            over_ok = result["over"] <= max(single["over"], OVERSHOOT_FLOOR)
            met = linear >= TARGET and over_ok
            if way == "router":
                ok = ok and met
            full = phases.steady_full
            table.add(
                n,
                "router" if way == "router" else "repeated --server-url",
                f"{result['rate']:,.0f}",
                f"{linear:.2f}x",
                f"{phases.steady_rate:,.0f}",
                f"{steady:.2f}x",
                "?" if full is None else f"{full:.1%}",
                f"{phases.ramp_s:.1f} + {phases.tail_s:.1f}",
                f"{result['over']:+.2%}",
                f"{result['cpu_ms']:.2f}",
                f">= {TARGET}x, overshoot <= 1 server's: {verdict(met)}" if n > 1 else "(baseline)",
            )
            print(f"scale: {way} x{n}: {detail(result)}")
    table.notes += notes(results, server_rate)
    publish(table, write)
    return ok
