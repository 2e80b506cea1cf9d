"""The fleet planner (issue 34) on the simulator: its cost and finish against the box alone,
the API alone, and the least-cost mix computed offline, over three deadlines.

Two `gen-tui sim` lanes: a free SGLang box (4 slots at 50 tok/s: 200 tok/s) and an OpenAI
API (16 in flight at 200 tok/s each, $10 per million output tokens, reported as usage.cost).
Each deadline is one in-process run over both lanes with `--deadline` and `--max-cost`. The
box alone and the API alone are computed from the rates that run measured (the box alone at
its delivered rate, free; the API alone at its price for the whole budget), as is the
offline optimum (`backends.plan` over the run's own window). Target: the planner finishes by
the deadline and spends at most 1.05x the offline optimum.
"""

from __future__ import annotations

import asyncio
import shutil
import time

import orjson

from bench.common import SCRATCH, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import Engine
from gen_tui.backends.figures import format_dollars
from gen_tui.backends.plan import Lane, plan

PRICE = 10e-6
API_RATE = 16 * 200.0
TARGET = 1.05
LENGTHS = ("--default-mean", "50", "--default-cv", "0.3")


async def one(box: str, api: str, budget: int, deadline_s: float) -> dict[str, float]:
    output = SCRATCH / "out-fleet-plan" / f"{deadline_s:g}"
    shutil.rmtree(output, ignore_errors=True)
    config = EngineConfig(
        datasets=[DatasetSpec("A", prompts("A", budget // 20), max_tokens=budget)],
        lanes=[f"box={box}", f"api={api},api=openai,concurrency=16,price=0/10"],
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=4,
        sampling={"max_new_tokens": 200},
        model="sim-model",
        deadline=f"{deadline_s:g}s",
        max_cost=1.0,
        plan_every=2.0,
    )
    started = time.time()
    await Engine(config).run()
    made = [orjson.loads(line) for line in (output / "A" / "raw_responses.jsonl").open("rb")]
    first = min(r["created"] - r["latency_s"] for r in made)
    box_made = [r for r in made if r["lane"] == "box"]
    box_first = min(r["created"] - r["latency_s"] for r in box_made)
    latency = sum(r["latency_s"] for r in box_made) / len(box_made)
    box_tokens = sum(r["completion_tokens"] for r in box_made)
    box_rate = box_tokens / (max(r["created"] for r in box_made) - box_first - latency)
    offline = plan(
        [Lane("box", box_rate, 0.0, latency), Lane("api", API_RATE, PRICE)],
        budget,
        started + deadline_s - first,
    )
    return {
        "finish": max(r["created"] for r in made) - started,
        "cost": sum(r["cost"] or 0.0 for r in made),
        "box_rate": box_rate,
        "offline_cost": offline.cost,
        "offline_finish": offline.finish_s + first - started,
    }


def run(smoke: bool, write: bool) -> bool:
    budget = 8_000 if smoke else 20_000
    deadlines = (15.0,) if smoke else (15.0, 30.0, 60.0)
    table = Table(
        "fleet_plan",
        f"Fleet plan: box + API on the simulator, {budget:,}-token budget",
        f"python -m bench fleet_plan{' --smoke' if smoke else ''}",
        ["deadline", "box only", "API only", "offline optimum", "planner", "target"],
    )
    ok = True
    with (
        simulator("--slots", "4", "--tokens-per-s", "50", *LENGTHS) as box,
        simulator("--slots", "32", "--tokens-per-s", "200", "--cost", "0,10", *LENGTHS) as api,
    ):
        for deadline in deadlines:
            got = asyncio.run(one(box, api, budget, deadline))
            met = got["finish"] <= deadline and got["cost"] <= TARGET * got["offline_cost"]
            ok = ok and met
            table.add(
                f"{deadline:g} s",
                f"$0, {budget / got['box_rate']:.0f} s",
                f"{format_dollars(budget * PRICE)}, {budget / API_RATE:.0f} s",
                f"{format_dollars(got['offline_cost'])}, {got['offline_finish']:.0f} s",
                f"{format_dollars(got['cost'])}, {got['finish']:.1f} s",
                f"by the deadline, <= {TARGET}x optimum: {verdict(met)}",
            )
    table.notes.append(
        "Each cell is cost, then finish, in seconds from just before the engine is made "
        "(the planner counts its deadline from its own start, a little later). The box alone "
        "misses every deadline here; the API alone is fast and costs the whole budget. The "
        "offline optimum fills the box's measured rate over the run's window (from its first "
        "request to the deadline) and buys the rest; the planner learns those rates while "
        "it runs (the API sends one request before the first plan, then is paced over the "
        "plan). "
        "Near the deadline the budget's last answers come one by one (the crossing "
        "answer's rule); with a deadline each of them, and any request sent with less time "
        "left than its lane takes, goes to the lane that delivers it soonest under the cap "
        "(the API), not the slow box. Before that rule the 15 s run ended 1.0 s late "
        "(16.0 s); with it, 15.3 to 15.5 s: the plan kept one mean box answer (1.05 s), "
        "which the box's capacity already waits, the box took a request with 1.06 s left, "
        "and the budget's taper then sent four API answers one after another (0.18 to 0.25 s "
        "each). A margin measured from the run's tail (backends/plan/margin.py: the taper's "
        "rounds from the budget's own rule at the soonest lane's request times, or the slow "
        "lane's tail past its mean), every request sent within it going to the soonest "
        "lane, brought it to 14.8 to 15.4 s, late in about one run in seven; on 6 December "
        "6 runs ended 14.74 to 15.69 s, two late; in one the box took a request 2.1 s before the "
        "deadline, outside the 1.4 s margin, and answered 1.1 s before it; the budget's rule "
        "held the taper back until then, and its four rounds on the API (0.25 to 0.33 s "
        "each) ended past the deadline. Now a request whose answer would land within the "
        "margin goes to the soonest lane, and the taper is counted past the answers in "
        "flight. Besides this table (6 December, a loaded machine), 9 probe runs at 15 s "
        "ended 14.06 to 14.71 s, all by the deadline, at 1.018x to 1.025x the optimum; 2 at "
        "30 s 28.95 and 29.44 s (1.035x, 1.019x); 5 at 60 s 59.07 to 59.27 s at 1.032x to "
        "1.061x: the box's last answer's worth moves to the API at every deadline, about 2% "
        "of the 60 s run's cost, which is now at the target's edge (2 of 5 at or over "
        "1.05x)."
        " Measured on 6 December (5 probe runs at 60 s, 1.029x to 1.063x): the excess "
        "is the box's idle end, bought on the API: the box made 215 to 513 tokens fewer "
        "than the optimum's split, its rate times the 1.1 to 2.6 s between its last "
        "answer and the deadline. The plan's margin (1.1 to 1.5 s at the end) keeps it "
        "idle for part of that; the rest is the budget's taper starting early: the runs "
        "ended 0.3 to 1.6 s before the deadline, the earliest costing most (1.2 and 1.6 "
        "s early: 1.062x, 1.063x), the box's slots empty while the rule held the last "
        "rounds back, each waiting on a box answer of about 1.2 s. The margin counts "
        "the taper's tokens twice (at the lanes' rate in the plan, and in its rounds, "
        "as their idle share of the full width, where a paced API does not run), but "
        "four changes to the margin and the route, 5 runs each, were not kept: 1.012x "
        "to 1.069x, none better on the whole; the one that brought the mean to 1.035x "
        "(the plan keeping the taper's rounds less its rate's time for their tokens) "
        "ended a run 0.19 s late, the box taking taper rounds of 1.1 s. A run of this "
        "bench after them, on the same code as this table: 15/30/60 s at "
        "1.023x/1.028x/1.036x, 14.3/29.3/59.2 s. On 6 December a priced lane's wave before "
        "the first plan became one request (bench fleet_batch: at 40 s the API's first "
        "wave was its only share but the taper's). Here the API's total is what the box "
        "leaves, so it moves nothing by itself: the same hour, 2 runs on the code before "
        "at 1.019x/1.035x/1.031x and 1.019x/1.021x/1.033x, 2 after at "
        "1.025x/1.031x/1.051x and 1.029x/1.027x/1.045x, and 1 with the wave put back "
        "at 1.023x/1.022x/1.062x (60 s: 58.8 to 59.4 s, the box's idle end again)."
        " Later on 6 December the margin's taper walk learned as its answers land "
        "(backends/engine/taper.py), a lone answer with room for many kept its cap "
        "(rules.goes_alone) and a fleet's requests were read by their own lane's latency "
        "line: the same hour (ratios of the table's rounded costs), 1 run on the code "
        "before at 1.02x/1.03x/1.05x (14.4/29.5/59.4 s), 3 after at 1.02x/1.03x/1.05x to "
        "1.06x (60 s: 58.4 to 58.7 s, one of them past 1.05x unrounded). Here, at a cap of "
        "200, the walk counts 76 rounds before and 4 after (these lanes as the unit tests "
        "measure them, 5,000 of 20,000 tokens on disk). The change "
        "is for a cap the size of the server's context: a 400k budget at 32,767, a box of 8"
        " slots at 100 tok/s and an API of 64 at 2,000 tok/s ($0.2/$0.94 a million), 60 s: "
        "before, a first-plan margin of 62 s (770 rounds, 13 answers a round and then one "
        "at a time), 'no lane mix meets the deadline', 395k of the 400k bought, $0.378 "
        "(about 1.12x an optimum near $0.337), done in 13 s; after, a margin of 2.1 s, box "
        "41k and API 358k planned, $0.344 (about 1.02x), done 1 s past the deadline (the "
        "budget's last rounds waited on a long box answer)."
        " Later on 6 December a free lane's rate came to count what its requests in flight "
        "have made from a client that does not stream (their ages on the lane's latency "
        "line): the same hour (ratios of the table's rounded costs), 2 runs before at "
        "1.012x/1.021x/1.049x and 1.023x/1.028x/1.037x, 2 after at 1.017x/1.028x/1.049x and "
        "1.017x/1.028x/1.024x. Then a plan late only by its margin's caution came to be made "
        "to the likely tail (the taper's rounds at their mean times): 60 s alone, 4 runs of "
        "each interleaved, 1.016x to 1.053x before (mean 1.039x) and 1.038x to 1.061x after "
        "(mean 1.046x), 58.5 to 59.8 s: the same within their noise, the 60 s run at the "
        "target's edge as before. (This bench re-plans every 2 s: the deadline's shorter "
        "re-plans of the same day change nothing here.)"
    )
    publish(table, write)
    return ok
