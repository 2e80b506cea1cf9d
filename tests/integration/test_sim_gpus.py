"""The demo's simulated GPUs: a stand-in nvidia-smi whose utilisation follows the simulated
server's load, read by a local host's watcher from the PATH the host gives it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.sim.nvidia_smi import write_standin
from tests.support.load import busy
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
        async with busy(server, 2):  # 2 of 4 slots busy: the GPUs about half busy
            await wait_until(
                lambda: all(45 <= (gpu.util or 0) <= 55 for gpu in board.gpus),
                30,
                "the GPUs half busy with the server",
                detail=lambda: str(board.gpus),
            )
        assert max(board.history(0)[0]) >= 0.45 and min(board.history(0)[0]) == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await host.kill(identity, grace_s=2)
        await host.close()
