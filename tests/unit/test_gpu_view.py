"""What the GPU strip is handed: this machine's GPUs as this process's runs read them
(NVML), then the watched hosts'; none from a run that reads none."""

from __future__ import annotations

from gen_tui.app.dashboard.sources import Activity
from gen_tui.app.dashboard.summary import gpu_view
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.telemetry.gpus import Gpu
from gen_tui.widgets.gpu_strip import GpuLine, compact_line

HERE = Gpu(0, "A100", util=55.0, mem_used=1.0, mem_total=2.0)
THERE = GpuLine("gpu-box", Gpu(3, "H100", util=97.0), (0.9, 0.97))


def _pool(gpus: tuple[tuple[Gpu, tuple[float, ...]], ...]) -> RunSnapshot:
    return RunSnapshot(
        datasets=(), concurrency=1, inflight=0, utilisation=0.0, elapsed_s=0.0, active_s=0.0,
        stopping=False, paused=False, gpus=gpus,
    )  # fmt: skip


def test_this_machines_gpus_then_the_watched_ones() -> None:
    activity = Activity("running", ("A",), [_pool(()), _pool(((HERE, (0.5, 0.55)),))])
    lines = gpu_view(activity, (THERE,))
    assert lines == (GpuLine("here", HERE, (0.5, 0.55)), THERE)
    assert "here:0 55%" in compact_line(lines, 80) and "gpu-box:3 97%" in compact_line(lines, 80)


def test_a_watched_local_host_shows_this_machines_gpus_once() -> None:
    activity = Activity("running", ("A",), [_pool(((HERE, (0.5, 0.55)),))])
    local = GpuLine("local", HERE, (0.5, 0.55), this_machine=True)
    assert gpu_view(activity, (local, THERE)) == (local, THERE)


def test_no_run_or_no_nvml_leaves_the_watched_ones() -> None:
    assert gpu_view(None, (THERE,)) == (THERE,)
    assert gpu_view(Activity("running", ("A",), [_pool(())]), ()) == ()
