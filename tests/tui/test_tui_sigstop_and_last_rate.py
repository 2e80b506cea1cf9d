"""Issue 31, point 19, on a real separate run: a process stopped with SIGSTOP is not a
paused run (it read "paused: nothing sent" forever; now it goes stale, saying the process
is stopped by a signal), and `r` on a dataset that has just run estimates the new budget's
time at its last run's rate (it said "no rate yet")."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from textual.widgets import Input

from gen_tui.app.demo_tui import SimProcessSource
from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.sim import LengthProfile, SimConfig
from gen_tui.widgets.dataset_panel import PanelView, rate_label
from tests.support.polling import wait_until
from tests.support.runs import alive
from tests.support.tui import SIZE, badge, panel, snap


async def test_a_sigstopped_run_goes_stale_and_r_uses_its_last_rate(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> None:
    folder = prompts_dir(S=2000)
    source = SimProcessSource(
        "S",
        tmp_path / "out",
        SimConfig(
            slots=2, tokens_per_s=300, vocab_size=vocab_size,
            default_profile=LengthProfile(mean=300),
        ),
        lambda: (folder, tokenizer_dir),
        ("--concurrency", "2", "--max-new-tokens", "1024"),
        grace_s=5.0,
    )  # fmt: skip
    app = GenTuiApp(None, hosts=[source], stale_after_s=3.0)
    link = app.links[0]
    pid = 0
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(
                lambda: snap(app, "S") and snap(app, "S").samples >= 3, 90, pause=pilot.pause
            )
            assert source.launched is not None
            pid = source.launched.pid
            os.kill(pid, signal.SIGSTOP)

            def stale() -> bool:
                return badge(app, "S") == "stale · press k"

            await wait_until(stale, 60, "the stopped process stale", pause=pilot.pause)
            shown = snap(app, "S")
            assert shown.state is DatasetState.ACTIVE
            assert rate_label(PanelView(shown)) != "paused: nothing sent"
            os.kill(pid, signal.SIGCONT)

            await pilot.press("k")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
            await pilot.press("y")
            await wait_until(lambda: link.outcome.get("S") is not None, 60, pause=pilot.pause)
            await wait_until(lambda: badge(app, "S") == "stopped", 20, pause=pilot.pause)
            assert snap(app, "S").tok_s == 0  # it produces nothing now

            await pilot.press("r")
            modal = await wait_until(
                lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
            )
            modal.query_one("#budget", Input).insert_text_at_cursor(
                str(snap(app, "S").tokens + 5000)
            )
            await pilot.pause(0.2)
            preview = str(modal.query_one("#budget-preview").render())
            assert "no rate yet" not in preview, preview
            assert "at its last run's" in preview and "tok/s" in preview, preview
            await pilot.press("escape")
            assert "S" in panel(app, "S").dataset
    finally:
        if pid and alive(pid):
            os.kill(pid, signal.SIGCONT)
        app.stop_links()
        link.done.wait(timeout=30)
        if pid and alive(pid):
            os.killpg(pid, signal.SIGKILL)
