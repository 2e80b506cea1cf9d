"""A run in a separate process (the demo's stale run): it goes stale, `k` stops it, `r` resumes
it to a new budget; the panel follows it through its host link."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from socket import gethostname

from textual.widgets import Input

from gen_tui.app.demo_tui import SimProcessSource
from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.sim import LengthProfile, SimConfig
from tests.support.polling import wait_until
from tests.support.records import recount
from tests.support.runs import alive
from tests.support.tui import SIZE, Notes, badge, panel, snap


async def test_separate_run_goes_stale_is_killed_then_resumed_to_its_budget(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> None:
    # One slow slot: a 300-token record about every 3 s, so with a 1 s threshold it is stale
    # between records while still writing. No token budget, like the seeds' forgotten run.
    folder = prompts_dir(S=2000)
    out = tmp_path / "out"
    source = SimProcessSource(
        "S",
        out,
        SimConfig(
            slots=1, tokens_per_s=100, vocab_size=vocab_size,
            default_profile=LengthProfile(mean=300),
        ),
        lambda: (folder, tokenizer_dir),
        ("--concurrency", "1", "--max-new-tokens", "1024"),
        grace_s=20.0,
    )  # fmt: skip
    notes = Notes()
    app = GenTuiApp(None, hosts=[source], stale_after_s=1.0)
    link = app.links[0]
    pids: list[int] = []
    try:
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            await wait_until(
                lambda: snap(app, "S") and snap(app, "S").samples >= 1, 90, pause=pilot.pause
            )
            first = source.launched
            assert first is not None
            pids.append(first.pid)
            # the machine's name, as the in-process runs' snapshots give it (not "local")
            assert snap(app, "S").pid == first.pid and snap(app, "S").host == gethostname()
            assert snap(app, "S").max_tokens is None
            await wait_until(lambda: badge(app, "S") == "stale · press k", 30, pause=pilot.pause)
            assert "no new record" in panel(app, "S").view.stale_reason

            await pilot.press("k")
            confirm = await wait_until(
                lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause
            )
            assert confirm
            body = str(app.screen.query_one("#confirm-body").render())
            assert f"pid {first.pid}" in body and f"on {gethostname()}" in body and "S" in body
            await pilot.press("y")
            await wait_until(lambda: link.outcome.get("S") is not None, 60, pause=pilot.pause)
            assert link.outcome["S"] == "stopped", notes.items
            assert not alive(first.pid)
            await wait_until(lambda: badge(app, "S") == "stopped", 10, pause=pilot.pause)
            tokens, records = recount(out / "S")
            await wait_until(
                lambda: (snap(app, "S").tokens, snap(app, "S").samples) == (tokens, records),
                pause=pilot.pause,
            )

            budget = tokens + 500
            await pilot.press("r")
            modal = await wait_until(
                lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
            )
            modal.query_one("#budget", Input).insert_text_at_cursor(str(budget))
            await pilot.press("enter")
            await wait_until(lambda: len(link.started) == 2, 60, pause=pilot.pause)
            second = link.started[-1]
            assert second is not None and second.pid != first.pid
            pids.append(second.pid)
            await wait_until(lambda: not alive(second.pid), 90, pause=pilot.pause)
            await wait_until(lambda: badge(app, "S") == "budget reached", 30, pause=pilot.pause)
            assert snap(app, "S").max_tokens == budget and snap(app, "S").pid == second.pid
            assert notes.find("S", f"pid {second.pid}")
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        for pid in pids:
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)
    final_tokens, final_records = recount(out / "S")
    assert budget <= final_tokens < budget + 1024 and final_records > records
    assert not any(alive(pid) for pid in pids)
