"""The remote watcher's telemetry: a server's /metrics and the GPUs read on the box and
forwarded on the watch stream, locally and over a real sshd, to the HostMonitor's panels."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends import watcher
from gen_tui.backends.hosts import RunIdentity, SSHHost
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.sim import SimServer
from gen_tui.backends.telemetry.metrics import parse_metrics
from tests.support.gpus import write_nvidia_smi
from tests.support.load import busy
from tests.support.polling import wait_until
from tests.support.runs import AnyHost, standin_argv
from tests.support.sim_http import reconfigure
from tests.support.sshd import start_sshd


async def test_fetch_metrics_reads_filters_and_says_why_not(sim: Callable[..., Any]) -> None:
    server = await sim(slots=2, tokens_per_s=20.0, context_length=200_000)
    async with busy(server, 3):
        await wait_until(lambda: server.stats.queued == 1, what="one request queued")
        message = await asyncio.to_thread(watcher.fetch_metrics, server.url)
    assert message["type"] == "metrics" and message["url"] == server.url
    text = message["text"]
    assert "# HELP" not in text and "_bucket" not in text and "_created" not in text
    metrics = parse_metrics(text)
    assert (metrics.running, metrics.queued) == (2, 1)

    await reconfigure(server, {"metrics": "off"})
    assert await asyncio.to_thread(watcher.fetch_metrics, server.url) == {
        "type": "metrics",
        "url": server.url,
        "absent": True,
    }
    await server.stop()
    gone = await asyncio.to_thread(watcher.fetch_metrics, server.url)
    assert "refused" in gone["error"].lower()
    assert watcher.fetch_metrics("file:///etc/passwd")["error"] == "not an http(s) URL"


def test_gpu_report_from_nvidia_smi_or_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert watcher.gpu_report() == {"type": "gpus", "absent": True}
    monkeypatch.setenv("PATH", f"{write_nvidia_smi(tmp_path / 'bin')}{os.pathsep}/usr/bin:/bin")
    report = watcher.gpu_report()
    assert report["gpus"] == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "util": 97.0, "mem_used": 75321.0,
         "mem_total": 81559.0, "power": 612.4, "temp": 71.0},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "util": 3.0, "mem_used": 1024.0,
         "mem_total": 81559.0, "power": None, "temp": 35.0},
    ]  # fmt: skip
    write_nvidia_smi(tmp_path / "broken", ["NVIDIA-SMI has failed"], exit_code=9)
    monkeypatch.setenv("PATH", f"{tmp_path / 'broken'}{os.pathsep}/usr/bin:/bin")
    assert watcher.gpu_report()["error"].startswith("nvidia-smi exited 9: NVIDIA-SMI has failed")


async def _watched(
    host: AnyHost, server: SimServer, standin: Path, tmp_path: Path
) -> tuple[HostMonitor, asyncio.Task[None], RunIdentity]:
    """A run on `host` that names `server` on its command line, and a monitor watching it
    (cancel the task to stop watching; the run is the caller's to stop)."""
    argv = standin_argv(standin, host.output_dir, "B2", "--server-url", server.url)
    identity = await host.start(argv, str(tmp_path / "b2.log"))
    monitor = HostMonitor(host, survey_s=0.3)
    return monitor, asyncio.create_task(monitor.run()), identity


async def test_the_servers_load_reaches_the_monitor_from_the_box(
    host: AnyHost,
    standin: Path,
    tmp_path: Path,
    sim: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Locally the watcher inherits this PATH: a stand-in nvidia-smi. The session's sshd has
    # none on its PATH: that box says once that it has no GPUs, and nothing more.
    stand_in = write_nvidia_smi(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{stand_in}{os.pathsep}{os.environ['PATH']}")
    server = await sim(slots=2, tokens_per_s=20.0, context_length=200_000)
    monitor, task, _ = await _watched(host, server, standin, tmp_path)  # (the fixture stops it)
    try:
        async with busy(server, 3):

            def loaded() -> bool:
                report = monitor.servers().get(server.url)
                return bool(report and report.metrics and report.metrics.queued == 1)

            await wait_until(loaded, 30, "the server's load, read on the box")
            report = monitor.servers()[server.url]
            assert report.state == "ok" and report.metrics is not None
            assert (report.metrics.server, report.metrics.running) == ("sglang", 2)
            assert report.metrics.gen_tok_s == 2 * 20.0
        if isinstance(host, SSHHost):
            await wait_until(lambda: monitor.telemetry.gpus_absent, 30, "no GPUs said")
            assert monitor.telemetry.board.gpus == ()
        else:
            await wait_until(lambda: len(monitor.telemetry.board.history(0)[0]) >= 2, 30)
            gpus = monitor.telemetry.board.gpus
            assert [(g.index, g.util, g.power) for g in gpus] == [(0, 97, 612.4), (1, 3, None)]
            util, memory = monitor.telemetry.board.history(0)
            assert set(util) == {0.97} and memory[-1] == pytest.approx(75321 / 81559)
        await reconfigure(server, {"metrics": "off"})
        await wait_until(
            lambda: (r := monitor.servers().get(server.url)) and r.metrics is None,
            30,
            "a server without metrics, said as such",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_gpus_over_a_real_sshd_from_nvidia_smi_on_the_remote_path(
    tmp_path: Path, standin: Path, sim: Callable[..., Any]
) -> None:
    bin_dir = write_nvidia_smi(tmp_path / "remote-bin")
    path = f"{bin_dir}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    sshd = start_sshd(tmp_path / "sshd", [f"SetEnv PATH={path}"])
    out = tmp_path / "out"
    out.mkdir()
    host = SSHHost("gpu-box", sshd.alias, str(out), options=sshd.options())
    try:
        await host.connect()
        server = await sim()
        monitor, task, identity = await _watched(host, server, standin, tmp_path)
        try:
            await wait_until(
                lambda: len(monitor.telemetry.board.gpus) == 2,
                30,
                "the stand-in's 2 GPUs over ssh",
                detail=lambda: f"absent={monitor.telemetry.gpus_absent}",
            )
            assert monitor.telemetry.board.gpus[0].name == "NVIDIA H100 80GB HBM3"
            assert monitor.telemetry.gpus_absent is False
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await host.kill(identity, grace_s=2)
    finally:
        await host.close()
        sshd.stop()
