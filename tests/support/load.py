"""Load on a simulated server for telemetry tests: long requests held while a block runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp


@contextlib.asynccontextmanager
async def busy(server: Any, count: int) -> AsyncIterator[None]:
    """Keep `count` long requests on `server` (it queues what its slots do not hold)."""
    async with aiohttp.ClientSession() as session:

        async def one(index: int) -> None:
            body = {
                "input_ids": [5] * 50,
                "rid": f"load/{index}",
                "sampling_params": {"max_new_tokens": 100_000, "ignore_eos": True},
            }
            async with session.post(f"{server.url}/generate", json=body) as response:
                await response.read()

        tasks = [asyncio.create_task(one(index)) for index in range(count)]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
