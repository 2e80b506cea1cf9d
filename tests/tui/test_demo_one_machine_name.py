"""The demo names its one machine once: its in-process datasets said `vm:PID` (the engine's
snapshots carry the machine's host name) and its stale B9 `local:PID`, the link's label
(issue 31, tried as a new user)."""

from __future__ import annotations

from pathlib import Path

from gen_tui.app.demo_tui import STALE
from tests.support.polling import wait_until
from tests.support.tui import demo_up, snap


async def test_the_stale_run_and_the_in_process_ones_name_the_same_machine(
    tmp_path: Path,
) -> None:
    async with demo_up(tmp_path) as up:
        app, pause = up.app, up.pilot.pause

        def hosts() -> set[str]:
            shown = (snap(app, name) for name in ("B1_glaive", STALE))
            return {seen.host for seen in shown if seen is not None}

        await wait_until(lambda: snap(app, STALE) and snap(app, "B1_glaive"), 90, pause=pause)
        assert len(hosts()) == 1, hosts()
        assert up.stale.name in hosts(), (up.stale.name, hosts())
