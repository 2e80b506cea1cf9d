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
planner had: the first request to the deadline, less one answer of the box (and no margin:
the planner sends no batch that would land within its margin, so at 20 s it fits one wave
fewer than this counts). Target: by the deadline, and at most 1.05x the three lanes' offline
optimum.
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
        "whole waves (2 batches of 20 requests; the simulator's took 3.41 to 3.52 s from "
        "create to end), so a longer deadline buys more of them and less of the API. No "
        "batch goes out that would land within the plan's margin before the deadline (its "
        "answers would hold the live lanes' taper; before that rule the runs of 5 "
        "December ended 0.6 to 2.0 s late). The 40 s run's excess (1.06x to 1.11x over 8 "
        "runs before 6 December's changes) was the API's first wave: a priced lane sent a "
        "wave of its width before the first plan, 16 answers (763 tokens, $0.0076) bought "
        "at twice the batch price, about 11% of the run's cost where the optimum buys no "
        "API at all; the rest was its taper (82 to 131 tokens). Now it sends one request "
        "(its rate per request, counted at its width, is what the plan needs): 1.017x to "
        "1.033x over 3 runs (39.05 to 39.44 s), the API making 157 to 220 tokens (its "
        "probe and the budget's last rounds) and the box idle from 38.2 to 38.8 s. Two "
        "more changes came from tracing the runs: a batch line's age says nothing of its "
        "length (the budget's rule took a line 3 s out for an answer past the cap, and "
        "held the live lanes back while a wave was out: in one 20 s run the box and the "
        "API idle from 15.5 to 18.1 s, 2,520 tokens left when the wave landed, the run "
        "0.57 s late); and a stall long after the last plan is re-planned at once (one "
        "waited 0.5 s more and a run ended 0.61 s late). What the 20 s run misses is one "
        "wave: the first goes with the first plan, 1.5 s after the first request (the "
        "box's first answer, 1.0 s, and the first plan's look every 0.5 s), the first "
        "request 1.0 to 1.35 s after the start (the run is its process's first: the "
        "tokenizer loads), so the waves land at about 6.0, 9.5, 13.0 and 16.5 s and a "
        "fifth would land at about 20 s, past the deadline less the plan's margin (1.5 "
        "s). The offline optimum counts five waves of 3.5 s from the first request to the "
        "deadline less one box answer (1.05 s); the API buys that wave's 2,000 tokens at "
        "twice the batch price: 1.083x to 1.090x over 3 runs (19.68 to 19.96 s). Sent at "
        "the first request (tried on 6 December, not kept), the fifth lands at about 18.3 "
        "to 18.6 s, at the margin's edge, and the budget's taper after a wave's landing "
        "took 1.6 to 2.1 s in the traced runs: five fit only on a warm engine (0.99x, "
        "1.00x) and ended at 19.6 to 20.35 s. Reaching 1.05x here needs a shorter start "
        "or a shorter taper, not a different split."
    )
    publish(table, write)
    return ok
