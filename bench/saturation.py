"""Server saturation: how close the engine keeps a fixed-capacity server to its ideal rate.

Two figures per concurrency. The target is on the first: the time until three quarters of
the run's tokens are on disk, while prompts are still plentiful, against the time the
server's capacity needs for them. That is what the client controls: whether every slot is
busy whenever there is work. The second is the whole run, first dispatch to last
completion, which adds the tail where the last long answers finish alone; no client that
cannot see lengths in advance avoids it, and it is reported, not targeted.
"""

from __future__ import annotations

import asyncio
import shutil
import time

from bench.common import SCRATCH, Table, prompts, publish, simulator, tokenizer, verdict
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import RunSnapshot

SLOTS = 64
RATE = 2000.0
SHARE = 0.75
TARGET = 0.98


async def one(url: str, concurrency: int, count: int, mark: int) -> tuple[float, float, int]:
    """(seconds from first dispatch to `mark` tokens on disk, whole run's seconds, tokens)."""
    output = SCRATCH / "out-saturation" / str(concurrency)
    shutil.rmtree(output, ignore_errors=True)
    first: list[float] = []
    crossed: list[float] = []
    last: list[tuple[float, int]] = []

    def snapshot(snap: RunSnapshot) -> None:
        now = time.monotonic()
        if not first and snap.inflight:
            first.append(now - snap.active_s)
        tokens = snap.datasets[0].tokens
        if not crossed and tokens >= mark and last:
            before, had = last[-1]  # interpolate between two 20 ms snapshots
            crossed.append(before + (now - before) * (mark - had) / max(1, tokens - had))
        last[:] = [(now, tokens)]

    config = EngineConfig(
        datasets=[DatasetSpec("A", prompts("A", count))],
        server_urls=[url],
        tokenizer=str(tokenizer()),
        output_dir=output,
        concurrency=concurrency,
        sampling={"max_new_tokens": 4096},
        snapshot_interval_s=0.02,
    )
    final = await Engine(config, on_snapshot=snapshot).run()
    return crossed[0] - first[0], final.active_s, final.datasets[0].tokens


def run(smoke: bool, write: bool) -> bool:
    count = 400 if smoke else 8000
    table = Table(
        "saturation",
        f"Server saturation ({SLOTS} slots x {RATE:g} tok/s, {count:,} prompts, mean 500)",
        f"python -m bench saturation{' --smoke' if smoke else ''}",
        [
            "concurrency",
            f"{SHARE:.0%} of tokens on disk",
            "ideal",
            "ideal / actual",
            "whole run (with its tail)",
            "ideal / whole",
            "target",
        ],
    )
    ok = True
    with simulator(
        "--slots", str(SLOTS), "--tokens-per-s", str(RATE), "--default-mean", "500"
    ) as url:
        # The prompt set and its lengths are fixed (the simulator draws them per prompt), so
        # one dry run gives the total the mark is a share of.
        total = asyncio.run(one(url, SLOTS, count, 1))[2]
        mark = int(total * SHARE)
        for concurrency in (SLOTS // 2, SLOTS, SLOTS * 2):
            to_mark, whole, tokens = asyncio.run(one(url, concurrency, count, mark))
            ideal = mark / (SLOTS * RATE)
            efficiency = ideal / to_mark
            full = tokens / (SLOTS * RATE)
            if concurrency >= SLOTS:
                met = efficiency >= TARGET
                ok = ok and met
                target = f">= {TARGET}: {verdict(met)}"
            else:
                target = f"(half the slots: at best {mark / (concurrency * RATE):.1f} s)"
            table.add(
                concurrency,
                f"{to_mark:.1f} s",
                f"{ideal:.1f} s",
                f"{efficiency:.3f}",
                f"{whole:.1f} s (ideal {full:.1f} s)",
                f"{full / whole:.3f}",
                target,
            )
    table.notes.append(
        f"Ideal = tokens / (slots x tok/s per slot). The first figure runs from the first "
        f"dispatch until {SHARE:.0%} of the run's {total:,} tokens are written: every slot "
        "should be busy all that time. Records only count once complete, so the answers in "
        "flight at the mark (about slots x half a mean answer) are not in it. The whole run "
        "adds the tail, where the last answers (up to 4,096 tokens, 2 s) run alone."
    )
    publish(table, write)
    return ok
