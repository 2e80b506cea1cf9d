"""The demo's simulated GPUs: a stand-in nvidia-smi whose utilisation follows the simulated
server's load, read by a local host's watcher from the PATH the host gives it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.monitor import HostMonitor
from gen_tui.backends.sim.nvidia_smi import write_standin
from tests.support.polling import wait_until
from tests.support.runs import standin_argv


async def test_simulated_gpus_follow_the_servers_load(
    sim: Callable[..., Any], tmp_path: Path, standin: Path
) -> None:
    server = await sim(slots=4, tokens_per_s=20.0, context_length=200_000)
    urls = tmp_path / "gpu-servers"
    urls.write_text(server.url + "\n")
    out = tmp_path / "out"
    out.mkdir()
    host = LocalHost(out)
    host.watcher_path = [str(write_standin(tmp_path / "gpus", urls))]
    identity = await host.start(standin_argv(standin, str(out), "B1"), str(tmp_path / "b1.log"))
    monitor = HostMonitor(host, survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    board = monitor.telemetry.board
    try:
        await wait_until(lambda: len(board.gpus) == 8, 30, "8 simulated GPUs, idle")
        assert all(gpu.util == 0 and gpu.name == "NVIDIA H100 (simulated)" for gpu in board.gpus)
        async with aiohttp.ClientSession() as session:

            async def one(index: int) -> None:
                body = {
                    "input_ids": [5] * 50,
                    "rid": f"load/{index}",
                    "sampling_params": {"max_new_tokens": 100_000, "ignore_eos": True},
                }
                async with session.post(f"{server.url}/generate", json=body) as response:
                    await response.read()

            tasks = [asyncio.create_task(one(index)) for index in range(2)]
            try:  # 2 of 4 slots busy: the GPUs about half busy
                await wait_until(
                    lambda: all(45 <= (gpu.util or 0) <= 55 for gpu in board.gpus),
                    30,
                    "the GPUs half busy with the server",
                    detail=lambda: str(board.gpus),
                )
            finally:
                for task_ in tasks:
                    task_.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        assert max(board.history(0)[0]) >= 0.45 and min(board.history(0)[0]) == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await host.kill(identity, grace_s=2)
        await host.close()
