"""This machine's GPUs through NVML (a stand-in pynvml: CI has no GPU): a local host's panels
and an in-process run get NVML's readings in place of nvidia-smi's; without NVML a local
host falls back to its watcher's nvidia-smi, and with neither nothing is shown and the
absence is said once."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.telemetry import nvml
from tests.support.engine import make_config, run
from tests.support.gpus import write_nvidia_smi
from tests.support.nvml import FakeGpu, fake_pynvml, installed
from tests.support.polling import wait_until

NVML_GPUS = [FakeGpu("NVIDIA A100-SXM4-40GB", 55, 20_000, 40_960, 300_000, 60)]
"""Unlike the stand-in nvidia-smi's two H100s, so whose reading shows is plain."""


async def _watch_locally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smi: bool) -> HostMonitor:
    """A local host's monitor, its watcher's PATH with the stand-in nvidia-smi or without."""
    folders = [str(write_nvidia_smi(tmp_path / "bin"))] if smi else []
    monkeypatch.setenv("PATH", os.pathsep.join([*folders, "/usr/bin", "/bin"]))
    out = tmp_path / "out"
    (out / "B2").mkdir(parents=True)
    return HostMonitor(LocalHost(out), ("B2",), survey_s=0.3)


async def _watching(monitor: HostMonitor, until: Callable[[], bool], what: str) -> None:
    task = asyncio.create_task(monitor.run())
    try:
        await wait_until(until, 30, what, detail=lambda: f"gpus={monitor.telemetry.board.gpus}")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await monitor.close()


async def test_a_local_host_reads_its_gpus_through_nvml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monitor = await _watch_locally(tmp_path, monkeypatch, smi=True)
    board = monitor.telemetry.board
    with installed(fake_pynvml(NVML_GPUS)):
        await _watching(monitor, lambda: len(board.history(0)[0]) >= 3, "three NVML samples")
    # NVML's GPU, not the two that nvidia-smi on the watcher's PATH would have shown.
    assert [(g.name, g.util, g.power, g.mem_used) for g in board.gpus] == [
        ("NVIDIA A100-SXM4-40GB", 55.0, 300.0, 20_000.0)
    ]
    assert set(board.history(0)[0]) == {0.55}
    assert not monitor.telemetry.gpus_absent


async def test_without_nvml_a_local_host_falls_back_to_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monitor = await _watch_locally(tmp_path, monkeypatch, smi=True)
    with installed(None):
        await _watching(monitor, lambda: len(monitor.telemetry.board.gpus) == 2, "nvidia-smi's")
    assert monitor.telemetry.board.gpus[0].name == "NVIDIA H100 80GB HBM3"


async def test_with_neither_a_local_host_shows_none_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monitor = await _watch_locally(tmp_path, monkeypatch, smi=False)
    with installed(fake_pynvml([], init_error="Driver Not Loaded")):
        await _watching(monitor, lambda: monitor.telemetry.gpus_absent, "no GPUs, said")
    assert monitor.telemetry.board.gpus == ()


@pytest.mark.parametrize("present", [True, False])
async def test_an_in_process_run_reads_this_machines_gpus(
    sim: Callable[..., Any],
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    tmp_path: Path,
    present: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A GPU box without the package: the one case the advice to install it is for.
    monkeypatch.setattr(nvml, "nvidia_device_present", lambda: True)
    server = await sim(tokens_per_s=2000.0, slots=8)
    config = make_config(
        tokenizer_dir, prompts_dir(A=40), tmp_path / "out", [server.url],
        concurrency=4, metrics_interval_s=0.1,
    )  # fmt: skip
    with installed(fake_pynvml(NVML_GPUS) if present else None):
        final, events, snapshots = await run(config)
    said = [message for _, message in events if "GPU" in message]
    if present:
        assert said == []
        ((gpu, history),) = final.gpus
        assert (gpu.index, gpu.name, gpu.util, gpu.mem_total, gpu.temp) == (
            0, "NVIDIA A100-SXM4-40GB", 55.0, 40_960.0, 60.0,
        )  # fmt: skip
        assert len(history) >= 2 and set(history) == {0.55}
    else:
        # Many rounds of reads (one every 0.1 s), one word of the GPUs.
        assert final.elapsed_s >= 5 * config.metrics_interval_s
        assert said == [
            "no GPU telemetry in this process: no NVML here: install nvidia-ml-py "
            "(pip install 'gen-tui[nvml]')"
        ]
        assert all(snap.gpus == () for snap in snapshots)
