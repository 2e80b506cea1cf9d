"""Server saturation: wall time to generate N tokens vs the capacity's ideal."""

from __future__ import annotations

import asyncio
import shutil

from bench.common import CACHE, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.engine import Engine
from gen_tui.backends.run_config import DatasetSpec, EngineConfig

SLOTS = 64
RATE = 2000.0


async def one(url: str, concurrency: int, count: int) -> tuple[float, int]:
    output = CACHE / "out-saturation" / str(concurrency)
    shutil.rmtree(output, ignore_errors=True)
    config = EngineConfig(
        datasets=[DatasetSpec("A", prompts("A", count))],
        server_urls=[url],
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=concurrency,
        sampling={"max_new_tokens": 4096},
    )
    final = await Engine(config).run()
    return final.active_s, final.datasets[0].tokens


def run(smoke: bool, write: bool) -> bool:
    count = 400 if smoke else 8000
    table = Table(
        "saturation",
        f"Server saturation ({SLOTS} slots x {RATE:g} tok/s, {count:,} prompts, mean 500)",
        f"python -m bench saturation{' --smoke' if smoke else ''}",
        ["concurrency", "tokens", "wall", "ideal", "ideal / wall", "target"],
    )
    ok = True
    with simulator(
        "--slots", str(SLOTS), "--tokens-per-s", str(RATE), "--default-mean", "500"
    ) as url:
        for concurrency in (SLOTS // 2, SLOTS, SLOTS * 2):
            wall, tokens = asyncio.run(one(url, concurrency, count))
            ideal = tokens / (min(concurrency, SLOTS) * RATE)
            full = tokens / (SLOTS * RATE)
            efficiency = full / wall
            target = concurrency >= SLOTS
            met = efficiency >= 0.98
            if target:
                ok = ok and met
            table.add(
                concurrency,
                f"{tokens:,}",
                f"{wall:.1f} s",
                f"{full:.1f} s",
                f"{efficiency:.3f}",
                f">= 0.98: {verdict(met)}" if target else f"(half the slots: ideal {ideal:.1f} s)",
            )
    table.notes.append(
        "Ideal = tokens / (slots x tok/s per slot). Wall runs from the first dispatch to the "
        "last completion, so it includes the tail where the last responses finish alone."
    )
    publish(table, write)
    return ok
