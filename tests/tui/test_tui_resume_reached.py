"""`r` with a budget a stopped dataset has reached already: Enter refuses, as the preview says.

Seen trying issue 31's story in the demo: B2 had crossed 10M, `r` 10M previewed "already
reached: 10M tokens are written; nothing to do", and Enter still said "resuming to 10M in a
new in-process run", which did nothing.
"""

from textual.widgets import Input, Label

from gen_tui.app.dialogs.modals import ResumeScreen, ResumeTarget
from gen_tui.app.tui import GenTuiApp
from tests.support.polling import wait_until

SIZE = (80, 24)


def target(running: bool) -> ResumeTarget:
    return ResumeTarget(
        name="B2", tokens=10_003_624, max_tokens=10_000_000, max_samples=None, tok_s=0.0,
        running=running,
    )  # fmt: skip


async def budget_entered(running: bool, typed: str) -> tuple[int | None, str, bool]:
    """What the dialog gave back (None: still open), its error line, and whether it is open."""
    results: list[int | None] = []
    app = GenTuiApp(None)
    async with app.run_test(size=SIZE) as pilot:
        screen = ResumeScreen(target(running))
        app.push_screen(screen, results.append)
        await wait_until(
            lambda: app.screen is screen and bool(screen.query("#budget")), pause=pilot.pause
        )
        screen.query_one("#budget", Input).value = typed
        await pilot.pause(0.1)
        await pilot.press("enter")
        await pilot.pause(0.2)
        still_open = app.screen is screen
        error = str(screen.query_one("#budget-error", Label).render()) if still_open else ""
    return (results[0] if results else None), error, still_open


async def test_a_reached_budget_is_refused_and_the_dialog_stays() -> None:
    given, error, still_open = await budget_entered(running=False, typed="10M")
    assert still_open and given is None, (given, error)
    assert "are written already" in error, error


async def test_a_larger_budget_resumes() -> None:
    given, error, still_open = await budget_entered(running=False, typed="12M")
    assert not still_open and given == 12_000_000, (given, error)


async def test_a_running_dataset_may_be_lowered_to_stop_dispatching() -> None:
    given, _, still_open = await budget_entered(running=True, typed="10M")
    assert not still_open and given == 10_000_000
