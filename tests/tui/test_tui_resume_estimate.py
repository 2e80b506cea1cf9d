"""Issue 31, a new user's retry of the demo: `r` on B2 said "about 1m28s at 56.8k tok/s",
its rate beside seven other datasets, and B2, alone once they had finished, did the 5M in
about 8 s. With no other dataset running, the estimate uses the server's rate in its last
run (every dataset's tokens), and says so; beside running ones, it says it is a share."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from textual.widgets import Input

from gen_tui.app.dialogs.modals import ResumeScreen, ResumeTarget, resume_preview
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.figures import parse_count
from gen_tui.backends.progress.snapshot import run_rate
from tests.support.polling import wait_until
from tests.support.tui import SIZE, badge, snap

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
