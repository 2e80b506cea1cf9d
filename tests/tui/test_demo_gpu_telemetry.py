"""The demo's log and its GPU strip agree: the strip shows the demo's simulated GPUs, and
the events say "GPU telemetry: simulated (demo)" once, never "no GPU telemetry"."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from gen_tui.app.host_links import HostLink
from gen_tui.app.tui import GenTuiApp
from gen_tui.widgets.gpu_strip import GpuStrip
from tests.support.polling import wait_until
from tests.support.tui import demo_up


@pytest.mark.quick
async def test_the_demo_says_its_gpus_are_simulated_while_its_strip_shows_them(
    tmp_path: Path,
) -> None:
    async with demo_up(tmp_path) as demo:
        await strip_and_log_agree(demo.app, demo.stale, demo.pilot)


async def strip_and_log_agree(app: GenTuiApp, stale: HostLink, pilot: Pilot[int]) -> None:
    dashboard = app.dashboard
    assert dashboard is not None
    strip = dashboard.query_one("#gpus", GpuStrip)

    def state() -> str:
        """What a failed wait reports: the stale run's host as read, and the events."""
        monitor = stale.monitor
        host = "not surveyed yet"
        if monitor is not None:
            telemetry = monitor.telemetry
            host = f"watch {monitor.watch_state!r}, GPUs absent {telemetry.gpus_absent!r}, "
            host += f"read at {telemetry.gpus_at!r}, "
            host += f"{len(telemetry.board.gpus)} GPUs read"
        events = "\n".join(dashboard.events)
        return f"the stale run's host: {host}; started {stale.started}\nevents:\n{events}"

    # The demo's start builds a tokenizer and starts a `gen-tui run` process whose host is
    # surveyed before a GPU shows: tens of seconds on a loaded machine.
    await wait_until(
        lambda: strip.view and strip.display, 90, "GPUs", pause=pilot.pause, detail=state
    )
    assert all("simulated" in line.gpu.name for line in strip.view)

    def said() -> list[str]:
        return [line for line in dashboard.events if "GPU" in line]

    await wait_until(said, 60, "a word of the GPUs", pause=pilot.pause, detail=state)
    # Three more reads of the GPUs (each at least 2 s after the last, so the engine's
    # telemetry, every 2 s, has read again too): still said once.
    monitor = stale.monitor
    assert monitor is not None
    reads = [monitor.telemetry.board.gpus]

    def read_again() -> bool:
        if monitor.telemetry.board.gpus is not reads[-1]:
            reads.append(monitor.telemetry.board.gpus)
        return len(reads) > 3

    await wait_until(read_again, 60, "three more GPU reads", pause=pilot.pause, detail=state)
    assert len(said()) == 1 and "GPU telemetry: simulated (demo)" in said()[0], said()
    assert not any("no GPU telemetry" in line for line in dashboard.events)
