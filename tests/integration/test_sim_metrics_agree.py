"""A real `gen-tui sim` under load: its /metrics and its /_sim/stats tell one story (issue
31, point 7). The demo's strip said `srv 1.1M tok/s` beside a header of 318k: the gauge was
the slots' nominal speed, not what was generated; here the machine cannot keep up with the
slots' speed, and the gauge must follow the generated-token counter, as SGLang's measured
gen_throughput does."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from bench.common import simulator
from gen_tui.backends.telemetry.metrics import MetricsReader

CLIENTS = 200
SLOTS = 128


async def _stream_forever(session: aiohttp.ClientSession, url: str, index: int) -> None:
    for turn in range(10_000):
        body = {
            # A prompt of its own: the simulator draws an answer's length from its prompt, so
            # one prompt for all gave every slot the same length and all 128 ended at once;
            # until the clients sent again the queue was empty (or the slots not all busy):
            # 8 of 208 readings at load 7, and a failed run (queued 0). With a prompt each,
            # answers end one by one: 0 of 158 readings, the queue never under 68.
            "input_ids": [5] * 49 + [6 + (index * 101 + turn) % 30_000],
            "rid": f"B2/{index}-{turn}",
            "stream": True,
            "sampling_params": {"max_new_tokens": 16384},
        }
        async with session.post(f"{url}/generate", json=body) as response:
            await response.read()


async def _read(session: aiohttp.ClientSession, url: str) -> tuple[str, dict[str, int]]:
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    async with session.get(f"{url}/_sim/stats") as response:
        stats = await response.json()
    return text, stats


async def test_a_loaded_sims_metrics_agree_with_its_stats_and_its_counter() -> None:
    # 128 slots at 50k tok/s each: 6.4M tok/s offered, far past what this machine streams
    with simulator(
        "--slots", str(SLOTS), "--tokens-per-s", "50000", "--default-mean", "3793"
    ) as url:
        reader = MetricsReader()
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            clients = [
                asyncio.create_task(_stream_forever(session, url, index))
                for index in range(CLIENTS)
            ]
            try:
                await asyncio.sleep(2.0)
                text, stats = await _read(session, url)
                first = reader.read(text, time.monotonic())
                started = time.monotonic()
                await asyncio.sleep(4.0)
                text, stats = await _read(session, url)
                later = reader.read(text, time.monotonic())
                elapsed = time.monotonic() - started
            finally:
                for task in clients:
                    task.cancel()
                await asyncio.gather(*clients, return_exceptions=True)
        # every slot busy, the rest waiting (less the clients between two requests): the
        # same counts in both, read a moment apart
        assert later.running == stats["in_flight"] == SLOTS
        assert later.queued is not None and 0 < later.queued <= CLIENTS - SLOTS
        assert 0 < stats["queued"] <= CLIENTS - SLOTS
        assert first.generation_tokens is not None and later.generation_tokens is not None
        generated = (later.generation_tokens - first.generation_tokens) / elapsed
        assert generated > 0
        assert later.gen_tok_s is not None
        # the gauge is what was generated (its window is about as long as the gap), not the
        # 6.4M tok/s the slots offer nor 0 while every stream runs behind its schedule
        assert 0.5 * generated <= later.gen_tok_s <= 2.0 * generated, (later.gen_tok_s, generated)
