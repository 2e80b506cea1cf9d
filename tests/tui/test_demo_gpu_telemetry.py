"""The demo's log and its GPU strip agree: the strip shows the demo's simulated GPUs, and
the events say "GPU telemetry: simulated (demo)" once, never "no GPU telemetry"."""

from __future__ import annotations

from pathlib import Path

from gen_tui.app.cli.launch import demo_app
from gen_tui.widgets.gpu_strip import GpuStrip
from tests.support.polling import wait_until
from tests.support.tui import SIZE


async def test_the_demo_says_its_gpus_are_simulated_while_its_strip_shows_them(
    tmp_path: Path,
) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dashboard = app.dashboard
        assert dashboard is not None
        strip = dashboard.query_one("#gpus", GpuStrip)
        await wait_until(lambda: strip.view and strip.display, 90, "GPUs", pause=pilot.pause)
        assert all("simulated" in line.gpu.name for line in strip.view)

        def said() -> list[str]:
            return [line for line in dashboard.events if "GPU" in line]

        await wait_until(said, 60, "a word of the GPUs", pause=pilot.pause)
        await pilot.pause(1.0)  # more rounds of reads: still said once
        assert len(said()) == 1 and "GPU telemetry: simulated (demo)" in said()[0], said()
        assert not any("no GPU telemetry" in line for line in dashboard.events)
