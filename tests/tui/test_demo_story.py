"""The user's story in the panel demo, in its order (issue 31, "Done when"): `k` on a stale
run (B9_stale), then `r` on B2 with 10M, then B2 crossing 10M live.

Tried again as a new user: B2 crossed its 10M about 50 s in, before B9 was ever stale
(B9 wrote a record every 80 s and flipped between running and stale), so `r` 10M had
nothing left to do. B2 now starts at 5M and B9 never finishes an answer, stale 15 s after
it starts. And the kill's question said "SIGKILL ... after 35 s" where the log then said
"drained for its whole grace (30 s)": one grace, said alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from gen_tui.app.demo_tui import STALE, STALE_GRACE_S, STORY_START, DemoSource
from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen
from gen_tui.backends.demo import STAR
from gen_tui.backends.progress.snapshot import run_rate
from gen_tui.backends.settings import DEMO_STALE_AFTER_S
from tests.support.polling import wait_until
from tests.support.tui import badge, demo_up, panel, snap

TEN_M = 10_000_000


# three waits in a row (stale, the kill's grace, the crossing), each bounded below
@pytest.mark.timeout(300)
async def test_k_on_the_stale_run_then_r_10M_on_B2_then_B2_crosses_10M_live(
    tmp_path: Path,
) -> None:
    async with demo_up(tmp_path) as demo:
        app, pilot, stale = demo.app, demo.pilot, demo.stale
        await wait_until(lambda: app.runs, 30, "the demo's run", pause=pilot.pause)
        assert isinstance(app.runs[0].source, DemoSource)
        await wait_until(lambda: stale.started, 120, "the stale run started", pause=pilot.pause)
        await wait_until(
            lambda: snap(app, STALE) is not None and badge(app, STALE) == "stale · press k",
            DEMO_STALE_AFTER_S + 45, "B9 stale", pause=pilot.pause,
            detail=lambda: f"B9 {badge(app, STALE) if snap(app, STALE) else None}",
        )  # fmt: skip
        b2 = snap(app, STAR)
        # the story's order: B2 is below 10M when B9 turns stale, and stops below it
        assert b2 is None or (b2.tokens < TEN_M and (b2.max_tokens or 0) <= STORY_START), b2

        # 1. `k` on B9: the question and the outcome name one grace
        panel(app, STALE).focus()
        await pilot.press("k")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        body = str(app.screen.query_one("#confirm-body").render())
        assert f"for up to its grace, {STALE_GRACE_S:g} s" in body, body
        await pilot.press("y")
        await wait_until(
            lambda: stale.outcome.get(STALE) is not None, STALE_GRACE_S + 30, "B9 stopped",
            pause=pilot.pause,
        )  # fmt: skip
        said = [text for _, text in app.events if "whole grace" in text]
        assert said and f"whole grace ({STALE_GRACE_S:g} s)" in said[-1], said

        # 2. `r` on B2 with 10M
        b2 = snap(app, STAR)
        assert b2 is not None and b2.tokens < TEN_M, b2
        panel(app, STAR).focus()
        await pilot.press("r")
        screen = await wait_until(
            lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
        )
        screen.query_one("#budget", Input).value = "10M"
        await pilot.pause(0.1)
        await pilot.press("enter")
        await wait_until(lambda: not isinstance(app.screen, ResumeScreen), pause=pilot.pause)
        before = snap(app, STAR)
        assert before is not None and before.tokens < TEN_M, before

        # 3. B2 crosses 10M, live, at the rate it ran (not a budget scaled down)
        rate = run_rate(before)  # its pace so far: the crossing is due in a few times that
        due = (TEN_M - before.tokens) / rate if rate > 0 else 60.0
        await wait_until(
            lambda: (s := snap(app, STAR)) is not None and s.tokens >= TEN_M,
            max(60.0, 3 * due), "B2 across 10M",
            pause=pilot.pause, detail=lambda: f"B2 {snap(app, STAR)}",
        )  # fmt: skip
        after = snap(app, STAR)
        assert after is not None and after.max_tokens == TEN_M, after
        crossed = [text for _, text in app.events if f"{STAR}: crossed its budget at 10," in text]
        assert crossed, app.events[-5:]
        # nothing of B1..B8 went stale on the demo's 15 s: they write many records a second
        went_stale = [text for _, text in app.events if "is stale" in text and STALE not in text]
        assert not went_stale, went_stale
