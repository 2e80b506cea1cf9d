"""`P` and `K`: pause or stop one dataset of a run of this process, the others going on; on
a run in another process they say why they cannot (issue 31, request 4)."""

from __future__ import annotations

from collections.abc import Callable

from textual.widgets import Input

from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetState
from tests.support.polling import wait_until
from tests.support.tui import SIZE, panel, snap


async def test_P_pauses_and_K_stops_one_dataset_while_the_others_go_on(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    app = app_factory(
        datasets={"A": (20000, 10**9), "B": (20000, 10**9)},
        tokens_per_s=500,
        max_new_tokens=300,
        mean=100,
    )
    async with app.run_test(size=SIZE) as pilot:

        def samples(name: str) -> int:
            seen = snap(app, name)
            return seen.samples if seen is not None else 0

        await wait_until(lambda: samples("A") > 0 and samples("B") > 0, 60, pause=pilot.pause)
        panel(app, "B").focus()
        await pilot.press("P")
        await wait_until(
            lambda: (
                (b := snap(app, "B")) is not None
                and b.state is DatasetState.PAUSED
                and b.inflight == 0
            ),
            30,
            "B paused and drained",
            pause=pilot.pause,
        )
        held, a_before = samples("B"), samples("A")
        await pilot.pause(1.5)
        assert samples("B") == held, "a paused dataset sends nothing"
        assert samples("A") > a_before, "the others go on"
        await pilot.press("P")
        await wait_until(lambda: samples("B") > held, 30, "B resumed", pause=pilot.pause)

        await pilot.press("K")
        modal = await wait_until(
            lambda: isinstance(app.screen, ConfirmScreen) and app.screen, pause=pilot.pause
        )
        assert "goes on with A" in str(modal.query_one("#confirm-body").render())
        await pilot.press("y")
        await wait_until(
            lambda: (b := snap(app, "B")) is not None and b.state is DatasetState.STOPPED,
            30,
            "B stopped alone",
            pause=pilot.pause,
        )
        a_before = samples("A")
        await pilot.pause(1.0)
        run = app.runs[0]
        assert run.active and samples("A") > a_before, (run.failure, snap(app, "A"), app.events)

        stopped = samples("B")
        await pilot.press("r")  # a new budget starts it again in the same run
        await wait_until(lambda: isinstance(app.screen, ResumeScreen), pause=pilot.pause)
        app.screen.query_one("#budget", Input).insert_text_at_cursor("5000000000")
        await pilot.press("enter")
        await wait_until(lambda: samples("B") > stopped, 30, "B resumed by r", pause=pilot.pause)
        assert len(app.runs) == 1
        app.runs[0].abort()
        await wait_until(lambda: not app.runs[0].active, 60, pause=pilot.pause)
