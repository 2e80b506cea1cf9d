"""`L` on the demo's stale run after `k` (issue 31, tried again at 160x48): the run had
ended, and `L` said "No log to show: no log found for this run". An ended run's log is
found in its output folder's start logs (`.gen-tui-logs/DATASET-STAMP.log`, where `r` and
`s` put theirs); the demo wrote B9's beside the output folder, where nothing looks."""

from __future__ import annotations

from pathlib import Path

from gen_tui.app.cli.launch import demo_app
from gen_tui.app.demo_tui import STALE
from gen_tui.backends.watcher.tails import log_of
from tests.support.polling import wait_until
from tests.support.tui import SIZE, started_stale_run


async def test_the_stale_runs_log_is_where_L_finds_it_once_the_run_has_ended(
    tmp_path: Path,
) -> None:
    app = demo_app(tmp_path, autostart=False)  # no run here: only the demo's stale run
    async with app.run_test(size=SIZE) as pilot:
        await started_stale_run(app, pilot)
        output = tmp_path / "output"
        # pid None: how `L` looks for the log of a run that has ended
        found = log_of(None, STALE, str(output))
        assert found is not None, f"no start log under {output}: {sorted(tmp_path.rglob('*.log'))}"
        await wait_until(
            lambda: Path(found).stat().st_size > 0, 30, "the run's output", pause=pilot.pause
        )
