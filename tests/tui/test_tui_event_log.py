"""The events pane (issue 31 point 10): wrapped at the screen's width, never under its
scrollbar, a cut line ending in "…", the newest line in view after a relayout; focusable."""

from __future__ import annotations

from textual.widgets import RichLog

from gen_tui.app.tui import GenTuiApp
from tests.support.polling import wait_until

WIDE = (160, 48)


def events_pane(app: GenTuiApp) -> RichLog:
    dashboard = app.dashboard
    assert dashboard is not None
    return dashboard.query_one("#events", RichLog)


def fits(log: RichLog) -> None:
    room = log.scrollable_content_region.width
    widths = [len(strip.text.rstrip()) for strip in log.lines]
    assert max(widths) <= room, f"a line runs under the scrollbar or off the pane: {widths}"


async def test_events_wrap_at_the_screen_width_and_keep_the_newest_line() -> None:
    app = GenTuiApp(None, names=["A", "B"])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        log = events_pane(app)
        assert log.display and log.can_focus
        long = " ".join(f"word{i}" for i in range(40))  # ~300 characters: two rows at 160
        for i in range(60):
            app.record_event("info", f"event {i}: {long}")
        app.record_event("warning", "x" * 2000 + " tail")
        app.record_event("info", "the newest line")
        await pilot.pause(0.2)
        room = log.scrollable_content_region.width
        assert room > 140, room
        first = log.lines[0].text.rstrip()
        assert len(first) > 120, f"wraps at ~80 columns on a 160-column screen: {first!r}"
        fits(log)
        texts = [strip.text.rstrip() for strip in log.lines]
        cut = [text for text in texts if text.startswith("x" * 50) or text == "x" * len(text)]
        assert cut and any(text.endswith("…") for text in texts), "a cut event ends in …"
        assert log.scroll_y == log.max_scroll_y, "the newest line in view"

        await pilot.resize_terminal(120, 40)  # a relayout: narrower and shorter
        await pilot.pause(0.3)
        await wait_until(lambda: log.scroll_y == log.max_scroll_y, 3, pause=pilot.pause)
        fits(log)
        assert log.lines[-1].text.rstrip().endswith("the newest line")
        await pilot.resize_terminal(*WIDE)
        await pilot.pause(0.3)
        await wait_until(lambda: log.scroll_y == log.max_scroll_y, 3, pause=pilot.pause)
        fits(log)
        assert log.lines[-1].text.rstrip().endswith("the newest line")


async def test_the_events_pane_takes_the_focus_and_scrolls_back() -> None:
    app = GenTuiApp(None, names=["A", "B"])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        log = events_pane(app)
        for i in range(100):
            app.record_event("info", f"event {i}")
        await pilot.pause(0.2)
        log.focus()
        await pilot.pause()
        await pilot.press("pageup")
        await pilot.pause()
        assert log.scroll_y < log.max_scroll_y
        app.record_event("info", "while reading")  # the reader stays where they are
        await pilot.pause(0.2)
        assert log.scroll_y < log.max_scroll_y
        await pilot.press("end")
        app.record_event("info", "back at the end")
        await pilot.pause(0.2)
        assert log.scroll_y == log.max_scroll_y


async def test_slash_on_the_events_pane_searches_it() -> None:
    app = GenTuiApp(None, names=["A", "B"])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        log = events_pane(app)
        for i in range(40):
            app.record_event("info", f"event {i}")
        app.record_event("warning", "B: host lost [b]gpu-box[/b]")
        await pilot.pause(0.2)
        log.focus()
        await pilot.press("slash", *"lost")
        await pilot.pause(0.2)
        texts = [strip.text.rstrip() for strip in log.lines]
        assert len(texts) == 1 and texts[0].endswith("host lost [b]gpu-box[/b]"), texts
        dashboard = app.dashboard
        assert dashboard is not None
        assert all(panel.display for panel in dashboard.panels()), "the panels are not filtered"
        await pilot.press("enter")
        await pilot.pause()
        assert app.focused is log and len(log.lines) == 1, "Enter keeps the search"
        await pilot.press("slash", "escape")
        await pilot.pause(0.2)
        assert len(log.lines) == 41 and app.focused is log, "Escape shows every event again"
        assert log.scroll_y == log.max_scroll_y


async def test_the_selection_stays_while_the_events_pane_has_the_focus() -> None:
    """`k` and `r` act on the selected panel: focusing the pane must not move it to the
    first one."""
    app = GenTuiApp(None, names=["A", "B"])
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        dashboard = app.dashboard
        assert dashboard is not None
        await pilot.press("right")
        await pilot.pause()
        chosen = dashboard.selected()
        assert chosen is not None and chosen.dataset == "B"
        events_pane(app).focus()
        await pilot.pause()
        assert app.focused is events_pane(app)
        chosen = dashboard.selected()
        assert chosen is not None and chosen.dataset == "B"
        await pilot.press("left")  # an arrow goes back to the panels, from where it was
        await pilot.pause()
        assert app.focused is not events_pane(app)
