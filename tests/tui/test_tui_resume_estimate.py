"""Issue 31, a new user's retry of the demo: `r` on B2 said "about 1m28s at 56.8k tok/s",
its rate beside seven other datasets, and B2, alone once they had finished, did the 5M in
about 8 s. With no other dataset running, the estimate uses the server's rate in its last
run (every dataset's tokens), and says so; beside running ones, it says it is a share."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from textual.widgets import Input

from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.dialogs.modals import ResumeScreen, ResumeTarget, resume_preview
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.figures import parse_count
from gen_tui.backends.progress.snapshot import run_rate
from gen_tui.backends.sim import SimServer
from tests.support.polling import wait_until
from tests.support.runs import alive, run_args, spawn
from tests.support.tui import SIZE, Notes, badge, panel, snap

NAMES = ("A", "B", "C")
BUDGET = 20_000
MORE = 60_000


async def test_r_after_the_others_finished_estimates_at_the_server_rate(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    # A slow server (8 slots x 2,000 tok/s): it, not the engine, sets the pace, so A alone
    # makes about three times its share beside B and C.
    app = app_factory(
        datasets={name: (2000, BUDGET) for name in NAMES}, tokens_per_s=2000.0, slots=8
    )
    async with app.run_test(size=SIZE) as pilot:

        def all_reached() -> bool:
            return all(badge(app, name) == "budget reached" for name in NAMES)

        await wait_until(all_reached, 120, "every dataset at its budget", pause=pilot.pause)
        shared = run_rate(snap(app, "A"))
        await pilot.press("r")  # A, the first, is selected
        modal = await wait_until(
            lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
        )
        start = snap(app, "A").tokens
        modal.query_one("#budget", Input).insert_text_at_cursor(str(start + MORE))
        await pilot.pause(0.2)
        preview = str(modal.query_one("#budget-preview").render())
        found = re.search(r"about \S+ at \D*?([\d.]+[kM]?) tok/s", preview)
        assert found, preview
        estimate = parse_count(found.group(1))
        await pilot.press("enter")

        def there() -> bool:
            now = snap(app, "A")  # None until the new run's first snapshot
            return (
                now is not None
                and now.tokens >= start + MORE
                and badge(app, "A") == ("budget reached")
            )

        await wait_until(
            there,
            120,
            "A at its new budget",
            pause=pilot.pause,
        )
        alone = run_rate(snap(app, "A"))
    # A alone went well past its share; the estimate is the pace it then held.
    assert alone > 1.8 * shared, (alone, shared)
    assert 0.6 < estimate / alone < 1.5, (estimate, alone, shared, preview)
    assert "nothing else runs now" in preview, preview  # what it is based on


def test_beside_running_datasets_the_estimate_says_it_is_a_share() -> None:
    target = ResumeTarget(
        name="B2", tokens=5_000_000, max_tokens=5_000_000, max_samples=None, tok_s=0.0,
        running=False, last_tok_s=56_800.0, others_running=7, server_tok_s=460_000.0,
    )  # fmt: skip
    said = resume_preview(target, 10_000_000)
    assert said == (
        "5M to go, about 1m28s at its last run's 56.8k tok/s, shared with 7 running "
        "datasets: faster once they finish"
    ), said
    alone = resume_preview(replace(target, others_running=0), 10_000_000)
    assert alone.startswith("5M to go, about 10s at 460k tok/s, the server's rate"), alone
    # No server rate known (a watched run): its own last rate, not called the server's.
    unknown = resume_preview(replace(target, others_running=0, server_tok_s=0.0), 10_000_000)
    assert unknown == "5M to go, about 1m28s at its last run's 56.8k tok/s", unknown


async def test_r_on_a_watched_run_says_its_rate_was_shared_with_the_hosts_running_ones(
    tmp_path: Path,
    sim: Callable[..., object],
    prompts_dir: Callable[..., Path],
    tokenizer_dir: Path,
) -> None:
    """The runs a panel watches, not its own: A's run has ended at its budget, B's still
    writes on the same host. `r` on A said "its last run's N tok/s" as though A would get
    that pace again, not that it was a share of the box beside B."""
    server = await sim(tokens_per_s=2000)  # type: ignore[misc]
    assert isinstance(server, SimServer)
    prompts = prompts_dir(A=400, B=20_000)
    out = tmp_path / "out"
    out.mkdir()
    runs = []
    for name, budget in (("A", "20k"), ("B", "10M")):
        flags = ("--datasets", name, "--max-tokens-per-dataset", budget)
        runs.append(await spawn(*run_args(tokenizer_dir, prompts, out, server.url, *flags)))
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    try:
        notes = Notes()
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:

            def a_ended_b_writes() -> bool:
                if not all(app.query(f"#{panel_id(name)}") for name in ("A", "B")):
                    return False
                b = snap(app, "B")
                return badge(app, "A") == "budget reached" and b is not None and b.samples > 0

            await asyncio.wait_for(runs[0].wait(), 60)  # A's run ended at its budget
            await wait_until(a_ended_b_writes, 90, "A at its budget, B writing", pause=pilot.pause)
            panel(app, "A").focus()
            monitor = app.links[0].monitor
            assert monitor is not None
            await wait_until(lambda: monitor.writer("A") is None, 60, "A's writer seen gone")
            assert badge(app, "B") == "running", "B still writes (the estimate's other one)"
            await pilot.press("r")
            modal = await wait_until(
                lambda: isinstance(app.screen, ResumeScreen) and app.screen,
                pause=pilot.pause,
                what="the resume dialog",
            )
            modal.query_one("#budget", Input).insert_text_at_cursor("60000")
            await pilot.pause(0.2)
            preview = str(modal.query_one("#budget-preview").render())
            assert "its last run's" in preview, preview
            assert "shared with 1 running dataset: faster once they finish" in preview, preview
            await pilot.press("escape")
    finally:
        app.stop_links()
        app.links[0].done.wait(timeout=30)
        for run in runs:
            if alive(run.pid):
                os.killpg(run.pid, signal.SIGKILL)
