"""The simulator's GET /metrics: SGLang's names (or vLLM's, or none) that move with its load,
read back through the parser the engine uses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp

from gen_tui.backends.sim import SimServer
from gen_tui.backends.telemetry.metrics import MetricsReader, ServerMetrics
from tests.support.polling import wait_until
from tests.support.sim_http import reconfigure


async def _read(session: aiohttp.ClientSession, server: SimServer) -> tuple[int, str]:
    async with session.get(f"{server.url}/metrics") as response:
        return response.status, await response.text()


async def _load(session: aiohttp.ClientSession, server: SimServer, count: int) -> list[Any]:
    async def one(index: int) -> None:
        body = {
            "input_ids": [5] * 100,
            "rid": f"ds/{index}",
            "sampling_params": {"max_new_tokens": 10_000, "ignore_eos": True},
        }
        async with session.post(f"{server.url}/generate", json=body) as response:
            await response.read()

    return [asyncio.create_task(one(index)) for index in range(count)]


async def test_sglang_metrics_follow_the_load(sim: Callable[..., Any]) -> None:
    server = await sim(slots=4, tokens_per_s=50.0)
    reader = MetricsReader()
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as session:
        status, text = await _read(session, server)
        assert status == 200
        assert 'sglang:num_running_reqs{engine_type="unified"' in text
        idle = reader.read(text, loop.time())
        assert (idle.running, idle.queued, idle.gen_tok_s, idle.retracted) == (0, 0, 0, 0)
        tasks = await _load(session, server, 6)
        try:

            async def busy() -> ServerMetrics | None:
                metrics = reader.read((await _read(session, server))[1], loop.time())
                return metrics if metrics.running == 4 and metrics.queued == 2 else None

            first = None
            async with asyncio.timeout(10):  # (wait_until polls a sync check; this one awaits)
                while first is None:
                    first = await busy()
            assert first.gen_tok_s == 4 * 50.0
            await asyncio.sleep(0.3)
            later = reader.read((await _read(session, server))[1], loop.time())
            assert later.kv_usage is not None and first.kv_usage is not None
            assert later.kv_usage > first.kv_usage  # each decoded token takes KV cache
            assert later.generation_tokens > first.generation_tokens  # type: ignore[operator]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await wait_until(lambda: server.stats.in_flight == 0, what="the slots to come free")
        done = reader.read((await _read(session, server))[1], loop.time())
        assert (done.running, done.queued, done.gen_tok_s) == (0, 0, 0)
        assert done.generation_tokens == server.stats.generated_tokens > 0


async def test_vllm_names_and_off(sim: Callable[..., Any]) -> None:
    server = await sim(slots=2, tokens_per_s=50.0, metrics="vllm")
    reader = MetricsReader()
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as session:
        tasks = await _load(session, server, 3)
        try:
            await wait_until(lambda: server.stats.queued == 1, what="one request queued")
            first = reader.read((await _read(session, server))[1], loop.time())
            assert (first.server, first.running, first.queued) == ("vllm", 2, 1)
            assert first.gen_tok_s is None  # vLLM has no gauge: a rate needs two reads
            await asyncio.sleep(0.5)
            second = reader.read((await _read(session, server))[1], loop.time())
            assert 50 <= second.gen_tok_s <= 150  # type: ignore[operator]  (2 x 50 tok/s)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await reconfigure(server, {"metrics": "off"})
        status, _ = await _read(session, server)
        assert status == 404  # as SGLang without --enable-metrics
