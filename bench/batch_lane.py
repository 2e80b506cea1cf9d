"""The batch lane against the live lane at the same budget: cost, overshoot, wall time.

Issue 33: the Batch API sells the same tokens for about half, and a batch cannot be
stopped once sent, so the question is whether the waves keep the budget as the live lane
does and what the saving is. Both lanes run in-process against one simulator process
priced at $1/$4 per million (in/out); its batches bill half of that, finish over
`batch_delay_s` each, and the lane polls every 0.2 s.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import urllib.request
from pathlib import Path

import orjson

from bench.common import SCRATCH, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import Engine
from gen_tui.backends.store.batch_journal import JOURNAL_FILE
from gen_tui.backends.store.records import RAW_FILE

NAME = "B1_batch"
MEAN = 600
DELAY_S = 2.0


def configure(url: str, patch: dict[str, object]) -> None:
    request = urllib.request.Request(f"{url}/_sim/config", data=orjson.dumps(patch), method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass


def spent(folder: Path) -> tuple[int, float, int]:
    """(tokens, dollars, records) of a dataset folder's records."""
    tokens, cost, count = 0, 0.0, 0
    for line in (folder / RAW_FILE).read_bytes().splitlines():
        record = orjson.loads(line)
        tokens += record["completion_tokens"]
        cost += record.get("cost") or 0.0
        count += 1
    return tokens, cost, count


async def one(url: str, api: str, budget: int, count: int) -> dict[str, float]:
    output = SCRATCH / "out-batch-lane" / api
    shutil.rmtree(output, ignore_errors=True)
    config = EngineConfig(
        datasets=[DatasetSpec(NAME, prompts(NAME, count), budget)],
        server_urls=[url],
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=128,
        sampling={"max_new_tokens": 4096},
        api=api,
        model="sim-model",
        batch_poll_s=0.2,
        snapshot_interval_s=0.1,
    )
    started = time.monotonic()
    await Engine(config).run()
    seconds = time.monotonic() - started
    tokens, cost, records = spent(output / NAME)
    journal = output / NAME / JOURNAL_FILE
    batches = journal.read_bytes().count(b'{"batch"') if journal.exists() else 0
    return {
        "tokens": tokens,
        "cost": cost,
        "seconds": seconds,
        "mean": tokens / records,
        "batches": batches,
    }


def run(smoke: bool, write: bool) -> bool:
    budget, count = (200_000, 1500) if smoke else (10_000_000, 30_000)
    with simulator(
        "--slots", "128", "--tokens-per-s", "3000", "--default-mean", str(MEAN),
        "--seed", "1", "--cost", "1,4",
    ) as url:  # fmt: skip
        configure(url, {"batch_delay_s": DELAY_S, "batch_validate_s": 0.1})
        live = asyncio.run(one(url, "openai", budget, count))
        batch = asyncio.run(one(url, "openai-batch", budget, count))
    table = Table(
        "batch_lane",
        f"Batch lane against the live lane ({budget:,} tokens, answers of mean {MEAN})",
        f"python -m bench batch_lane{' --smoke' if smoke else ''}",
        [
            "lane",
            "final tokens",
            "overshoot",
            "cost",
            "cost vs live",
            "batches",
            "wall time",
            "target",
        ],
    )
    ok = True
    for name, result in (("live (--api openai)", live), ("batch (--api openai-batch)", batch)):
        over = result["tokens"] - budget
        close = abs(over) <= max(0.002 * budget, result["mean"])
        ratio = result["cost"] / live["cost"]
        if result is batch:
            met = close and ratio <= 0.55
            target = f"<= 0.55x live's cost, within max(0.2%, one mean answer): {verdict(met)}"
            ok = ok and met
        else:
            target = "(baseline)"
        table.add(
            name,
            f"{result['tokens']:,}",
            f"{over / budget:+.3%}",
            f"${result['cost']:.2f}",
            f"{ratio:.2f}x",
            f"{result['batches']:.0f}" if result is batch else "-",
            f"{result['seconds']:.1f} s",
            target,
        )
    table.notes.append(
        f"Simulator: 128 slots x 3,000 tok/s, lognormal lengths (mean {MEAN}, cv 0.95), "
        f"$1/$4 per million in/out live and half that in batches, each batch done "
        f"{DELAY_S:g} s after it is created (a real provider takes minutes to hours: the "
        "wall time then is that delay times the number of waves). Predictive mode; the "
        "batch lane's first wave is sized at the answer cap (4,096: nothing is known "
        "yet), the next ones from the lengths back, each leaving two standard deviations "
        "of the sum in flight free."
    )
    publish(table, write)
    return ok
