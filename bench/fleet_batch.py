"""The fleet planner with a batch lane (issues 33 and 34) on the simulator: a free box, a
live API and a batch lane at half the API's price, over two deadlines; its cost and finish
against the box alone, the API alone, box + API (no batch lane), and the least-cost mix of
the three computed offline.

Three `gen-tui sim` lanes: a free SGLang box (4 slots at 50 tok/s: 200 tok/s), an OpenAI
API (16 in flight at 200 tok/s each, $10 per million output tokens) and a batch lane (the
simulator's Batch API: 3 s a batch, $5 per million; 2 batches of 20 requests in flight).
Each deadline is one in-process run over the three lanes with `--deadline` and `--max-cost`.
The offline figures are `backends.plan` at the rates that run measured (the box's delivered
rate, the batch lane's waves at its mean answer and a 3.5 s turnaround), over the window the
planner had: the first request to the deadline, less one answer of the box. Target: by the
deadline, and at most 1.05x the three lanes' offline optimum.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import urllib.request

import orjson

from bench.common import SCRATCH, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import Engine
from gen_tui.backends.figures import format_dollars
from gen_tui.backends.plan import Lane, plan

API_PRICE, BATCH_PRICE = 10e-6, 5e-6
API_RATE = 16 * 200.0
BATCH_REQUESTS, BATCH_IN_FLIGHT = 20, 2
BATCH_DELAY_S, TURNAROUND_S = 3.0, 3.5
TARGET = 1.05
LENGTHS = ("--default-mean", "50", "--default-cv", "0.3")


async def one(box: str, api: str, batch: str, budget: int, deadline_s: float) -> dict[str, float]:
    output = SCRATCH / "out-fleet-batch" / f"{deadline_s:g}"
    shutil.rmtree(output, ignore_errors=True)
    config = EngineConfig(
        datasets=[DatasetSpec("A", prompts("A", budget // 20), max_tokens=budget)],
        lanes=[
            f"box={box}",
            f"api={api},api=openai,concurrency=16,price=0/10",
            f"batch={batch},api=openai-batch,price=0/5,turnaround=4s",
        ],
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=4,
        sampling={"max_new_tokens": 200},
        model="sim-model",
        deadline=f"{deadline_s:g}s",
        max_cost=1.0,
        plan_every=2.0,
        batch_max_requests=BATCH_REQUESTS,
        batch_in_flight=BATCH_IN_FLIGHT,
        batch_poll_s=0.1,
    )
    started = time.time()
    await Engine(config).run()
    made = [orjson.loads(line) for line in (output / "A" / "raw_responses.jsonl").open("rb")]
    live = [r for r in made if r["lane"] != "batch"]
    first = min(r["created"] - r["latency_s"] for r in live)
    box_made = [r for r in made if r["lane"] == "box"]
    box_first = min(r["created"] - r["latency_s"] for r in box_made)
    latency = sum(r["latency_s"] for r in box_made) / len(box_made)
    box_tokens = sum(r["completion_tokens"] for r in box_made)
    box_rate = box_tokens / (max(r["created"] for r in box_made) - box_first - latency)
    mean = sum(r["completion_tokens"] for r in made) / len(made)
    wave = BATCH_REQUESTS * BATCH_IN_FLIGHT * mean
    window = started + deadline_s - first - latency
    lanes = [Lane("box", box_rate, 0.0, latency), Lane("api", API_RATE, API_PRICE)]
    batch_lane = Lane("batch", wave / TURNAROUND_S, BATCH_PRICE, TURNAROUND_S, wave=wave)
    return {
        "finish": max(r["created"] for r in made) - started,
        "cost": sum(r["cost"] or 0.0 for r in made),
        "batch_tokens": sum(r["completion_tokens"] for r in made if r["lane"] == "batch"),
        "box_rate": box_rate,
        "two_lanes": plan(lanes, budget, window).cost,
        "offline": plan([*lanes, batch_lane], budget, window).cost,
    }


def slow_batches(url: str) -> None:
    data = orjson.dumps({"batch_delay_s": BATCH_DELAY_S})
    request = urllib.request.Request(f"{url}/_sim/config", data=data, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def run(smoke: bool, write: bool) -> bool:
    budget = 20_000
    deadlines = (20.0,) if smoke else (20.0, 40.0)
    table = Table(
        "fleet_batch",
        f"Fleet plan with a batch lane: box + API + batch on the simulator, {budget:,} tokens",
        f"python -m bench fleet_batch{' --smoke' if smoke else ''}",
        ["deadline", "box only", "API only", "box + API", "offline optimum", "planner", "target"],
    )
    ok = True
    with (
        simulator("--slots", "4", "--tokens-per-s", "50", *LENGTHS) as box,
        simulator("--slots", "32", "--tokens-per-s", "200", "--cost", "0,10", *LENGTHS) as api,
        simulator("--cost", "0,10", *LENGTHS) as batch,
    ):
        slow_batches(batch)
        for deadline in deadlines:
            got = asyncio.run(one(box, api, batch, budget, deadline))
            met = got["finish"] <= deadline and got["cost"] <= TARGET * got["offline"]
            ok = ok and met
            table.add(
                f"{deadline:g} s",
                f"$0, {budget / got['box_rate']:.0f} s",
                f"{format_dollars(budget * API_PRICE)}, {budget / API_RATE:.0f} s",
                format_dollars(got["two_lanes"]),
                format_dollars(got["offline"]),
                f"{format_dollars(got['cost'])}, {got['finish']:.1f} s, "
                f"batch {got['batch_tokens']:,.0f} tokens",
                f"by the deadline, <= {TARGET}x optimum: {verdict(met)}",
            )
    table.notes.append(
        "Costs; the planner's finish is in seconds from just before the engine is made. "
        "`box + API` is the least-cost mix without the batch lane over the same window: "
        "what the batch lane saves is the difference. The batch lane's tokens come in "
        "whole waves (2 batches of 20 requests each 3.5 s), so a longer deadline buys more "
        "of them and less of the API. Both targets were missed on 2026-12-05: the runs "
        "ended 2.0 s and 0.6 s past their deadlines (counted from before the engine is "
        "made), and the 40 s run spent 1.06x the optimum (the 20 s one 0.98x). A batch "
        "sent once a flight's answers came back short, landing a turnaround past the "
        "deadline, was one cause and is fixed; planning the lane at the longest "
        "turnaround seen rather than the mean did not move the finish, so the rest is not"
        " its waves landing late. With the plan's margin measured from the run's tail "
        "(backends/plan/margin.py, see fleet_plan), two runs later that day: 20 s ended "
        "20.9 s both times (0.9 s late, 1.06x in this table), 40 s 38.7 s and 39.6 s (by "
        "the deadline; 1.08x and 1.05x the optimum, over it). The 20 s lateness is not "
        "the live lanes' taper, which the margin now covers; it is not measured further."
    )
    publish(table, write)
    return ok
