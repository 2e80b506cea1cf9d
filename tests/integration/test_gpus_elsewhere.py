"""A run whose GPUs are shown from elsewhere (the demo's simulated ones) says where, once,
and reads no NVML, even where NVML answers: the log and the GPU strip must not disagree
("no GPU telemetry" under a strip of eight GPUs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.app.demo_tui import GPU_TELEMETRY
from tests.support.engine import make_config, run
from tests.support.nvml import FakeGpu, fake_pynvml, installed


async def test_a_run_with_gpus_shown_elsewhere_says_so_once_and_reads_no_nvml(
    sim: Callable[..., Any], tokenizer_dir: Path, prompts_dir: Callable[..., Path], tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=2000.0, slots=8)
    config = make_config(
        tokenizer_dir, prompts_dir(A=40), tmp_path / "out", [server.url],
        concurrency=4, metrics_interval_s=0.1, gpu_telemetry=GPU_TELEMETRY,
    )  # fmt: skip
    with installed(fake_pynvml([FakeGpu("NVIDIA A100-SXM4-40GB", 55, 20_000, 40_960, 1, 60)])):
        final, events, snapshots = await run(config)
    assert final.elapsed_s >= 5 * config.metrics_interval_s  # many rounds of reads
    said = [message for _, message in events if "GPU" in message]
    assert said == [f"GPU telemetry: {GPU_TELEMETRY}"]
    assert said[0].startswith("GPU telemetry: simulated (demo)")
    assert all(snap.gpus == () for snap in snapshots), "this machine's GPUs were read"
