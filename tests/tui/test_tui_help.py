"""`?` help at the smallest terminal: every line reachable by scrolling (issue 31 point 4)."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Label, Static

from gen_tui.app.dialogs.modals import HelpScreen
from gen_tui.app.tui import GenTuiApp
from tests.support.polling import wait_until
from tests.support.tui import SIZE


def shown(widget: Widget, within: Widget) -> bool:
    """Whether `widget` is inside `within`'s visible rows (scrolled to, not clipped away)."""
    outer, inner = within.region, widget.region
    return outer.y <= inner.y and inner.bottom <= outer.bottom and inner.height > 0


async def test_help_scrolls_to_its_last_line_at_80x24() -> None:
    app = GenTuiApp(None, names=[f"B{i}" for i in range(1, 10)])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_until(lambda: isinstance(app.screen, HelpScreen), 5, pause=pilot.pause)
        await pilot.pause()
        help_screen = app.screen
        dialog = help_screen.query_one(".dialog", Widget)
        assert dialog.region.bottom <= SIZE[1], "the dialog fits the screen"
        close = help_screen.query_one("#help-close", Label)
        assert not shown(close, dialog), "at 80x24 the help is taller than the screen"
        for _ in range(6):
            await pilot.press("pagedown")
        await pilot.pause()
        assert shown(close, dialog), "PageDown reaches 'Escape closes'"
        assert isinstance(dialog, VerticalScroll)
        await pilot.press("home")
        await pilot.pause()
        assert dialog.scroll_y == 0
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, HelpScreen), 5, pause=pilot.pause)
        await pilot.press("question_mark")  # installed: opens again at the top
        await wait_until(lambda: isinstance(app.screen, HelpScreen), 5, pause=pilot.pause)
        assert app.screen.query_one(".dialog", VerticalScroll).scroll_y == 0


async def test_slash_searches_help() -> None:
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_until(lambda: isinstance(app.screen, HelpScreen), 5, pause=pilot.pause)
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        await pilot.press("slash", *"quit")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen), "typing q in the search does not close help"
        table = help_screen.query_one("#help-table", Static)
        shown_rows = table.render_lines(table.region.reset_offset)
        text = "\n".join(strip.text for strip in shown_rows)
        assert "ctrl+q" in text and "Kill" not in text, text
        await pilot.press("enter", "escape")
        await wait_until(lambda: not isinstance(app.screen, HelpScreen), 5, pause=pilot.pause)
