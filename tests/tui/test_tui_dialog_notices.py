"""A notice (toast) never covers an open dialog: at 80x24 one was drawn over the Resume
dialog's right edge (issue 31, tried as a new user). It waits, and shows once the dialog
closes if it is still current."""

from __future__ import annotations

from textual.widgets._toast import Toast

from gen_tui.app.dialogs.modals import ConfirmScreen
from tests.support.panel_snapshots import run_of, shown, snapshot, static_app
from tests.support.polling import wait_until
from tests.support.tui import SIZE


def drawn_toasts(app: object) -> list[Toast]:
    screen = app.screen  # type: ignore[attr-defined]
    return [toast for toast in screen.query(Toast) if toast.region.area > 0]


async def test_a_notice_waits_while_a_dialog_is_open_and_shows_after() -> None:
    app, static = static_app(["A"])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A")))
        await app.push_screen(ConfirmScreen("Kill run?", "pid 4242 " * 40, "Kill"))
        modal = app.screen
        assert isinstance(modal, ConfirmScreen)
        app.notify("a long notice from a host " * 4, title="B9", timeout=30)
        await pilot.pause(0.3)
        dialog = modal.query_one(".dialog").region
        covering = [t.region for t in drawn_toasts(app) if t.region.overlaps(dialog)]
        assert covering == [], (covering, dialog)
        await pilot.press("n")
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        await wait_until(lambda: drawn_toasts(app), 5, "the notice shown", pause=pilot.pause)
