"""`/`, `n`, `N` and PageUp/PageDown/Home/End in `v` (the last answers) and `L` (the log)
(issue 31, request 2: help and the events pane searched, these two did not).

The screens over the real app at 80x24, fed by a `Peek` whose reads return fixed lines (as
a record file and a log would give them): what a match is, which row it lands on once
wrapped, and whether it is in view are read from what the body draws, not from the
search's own figures.
"""

from __future__ import annotations

import json

from rich.text import Text
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.widgets import Input, Label, Static

from gen_tui.app.dialogs.peek import LogScreen, SampleScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.store.tails import Peek, Tail
from gen_tui.widgets.found_text import CURRENT_STYLE, MATCH_STYLE
from tests.support.polling import wait_until
from tests.support.tui import SIZE, sample_screen

FILLER = "the quick brown fox jumps over the lazy dog while the run writes its answers "
"""About 80 characters: each line below wraps at 80 columns, so rows are not lines."""
NEEDLE = "[b]gpu-box[/b] lost"
"""Rich markup in the text and in what is typed: both are characters, never markup."""


def log_lines() -> tuple[str, ...]:
    lines = [f"step {i}: {FILLER}{i}" for i in range(200)]
    lines[30] = f"step 30: host {NEEDLE} first"
    lines[150] = f"step 150: {FILLER} host {NEEDLE.upper()} second"
    lines[185] = f"step 185: host {NEEDLE} third"
    return tuple(lines)


def drawn_rows(app: GenTuiApp) -> list[str]:
    """The body as it is drawn at its width, one string per row."""
    body = app.screen.query_one("#peek-body", Static)
    strips = body.render_lines(Region(0, 0, body.size.width, body.virtual_size.height))
    return [strip.text for strip in strips]


def in_view(app: GenTuiApp, word: str) -> bool:
    """Whether the row drawing `word` is within the scrolled view."""
    scroll = app.screen.query_one("#peek-scroll", VerticalScroll)
    rows = [i for i, row in enumerate(drawn_rows(app)) if word in row]
    assert len(rows) == 1, (word, rows)
    top = round(scroll.scroll_y)
    return top <= rows[0] < top + scroll.scrollable_content_region.height


def styles_at(app: GenTuiApp, start: int, end: int) -> set[str]:
    """The styles the body's text has over [start, end) (the matches' marks)."""
    screen = app.screen
    assert isinstance(screen, LogScreen | SampleScreen)
    shown = screen.finder.marked(screen.text)
    assert shown.plain == screen.text.plain, "the marks change no character"
    body = screen.query_one("#peek-body", Static).render()
    plain = body.plain if isinstance(body, Text) else str(getattr(body, "plain", body))
    assert plain == shown.plain, "the body draws the text searched"
    return {
        str(span.style)
        for span in shown.spans
        if span.start <= start and span.end >= end and str(span.style)
    }


def found(app: GenTuiApp) -> str:
    return str(app.screen.query_one("#peek-found", Label).render())


async def scrolls_with_the_keys(pilot: object, app: GenTuiApp) -> None:
    """PageUp/PageDown/Home/End move the view, with the focus on it after a search."""
    scroll = app.screen.query_one("#peek-scroll", VerticalScroll)
    assert scroll.has_focus and scroll.max_scroll_y > 0
    press, pause = pilot.press, pilot.pause  # type: ignore[attr-defined]
    await press("home")
    await wait_until(lambda: scroll.scroll_y == 0, 3, pause=pause)
    await press("pagedown")
    await wait_until(lambda: scroll.scroll_y > 0, 3, pause=pause)
    down = scroll.scroll_y
    await press("pagedown")
    await wait_until(lambda: scroll.scroll_y > down, 3, pause=pause)
    await press("end")
    await wait_until(lambda: scroll.scroll_y == scroll.max_scroll_y, 3, pause=pause)
    await press("pageup")
    await wait_until(lambda: scroll.scroll_y < scroll.max_scroll_y, 3, pause=pause)


async def test_l_searches_its_log_with_slash_n_and_shift_n_and_pages() -> None:
    lines = log_lines()
    peek = Peek(records=lambda n: Tail(), log=lambda n: Tail(lines=lines[-n:], path="run.log"))
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: app.screen is app.dashboard, 10, pause=pilot.pause)
        await app.push_screen(LogScreen("A", peek, lambda: ()))
        await wait_until(lambda: "step 199" in "".join(drawn_rows(app)), 10, pause=pilot.pause)
        screen = app.screen
        assert isinstance(screen, LogScreen)
        assert len(drawn_rows(app)) > len(lines) + 50, "lines wrap: rows are not lines"
        await pilot.press("slash")
        search = screen.query_one("#peek-search", Input)
        await wait_until(lambda: search.has_focus, 3, pause=pilot.pause)
        await pilot.press(*NEEDLE)
        await wait_until(lambda: "1 of 3" in found(app), 3, pause=pilot.pause)
        assert found(app).startswith(f"“{NEEDLE}”: 1 of 3")
        await wait_until(lambda: in_view(app, "first"), 3, "the first match in view",
                         pause=pilot.pause)  # fmt: skip
        first = screen.text.plain.index(NEEDLE)
        assert CURRENT_STYLE in styles_at(app, first, first + len(NEEDLE))
        assert f"host {NEEDLE} first" in "".join(drawn_rows(app)), "the markup drawn as text"

        await pilot.press("enter")
        await wait_until(lambda: not search.display, 3, pause=pilot.pause)
        assert "1 of 3" in found(app), "Enter keeps the search"
        await pilot.press("n")
        await wait_until(lambda: "2 of 3" in found(app), 3, pause=pilot.pause)
        await wait_until(lambda: in_view(app, "second"), 3, "the second match (any case)",
                         pause=pilot.pause)  # fmt: skip
        assert not in_view(app, "first")
        second = screen.text.plain.index(NEEDLE.upper())
        assert CURRENT_STYLE in styles_at(app, second, second + len(NEEDLE))
        assert MATCH_STYLE in styles_at(app, first, first + len(NEEDLE))
        await pilot.press("n")
        await wait_until(lambda: in_view(app, "third"), 3, pause=pilot.pause)
        await pilot.press("n")  # round the end, to the first again
        await wait_until(lambda: "1 of 3" in found(app) and in_view(app, "first"), 3,
                         pause=pilot.pause)  # fmt: skip
        await pilot.press("N")  # back round, to the last
        await wait_until(lambda: "3 of 3" in found(app) and in_view(app, "third"), 3,
                         pause=pilot.pause)  # fmt: skip

        await scrolls_with_the_keys(pilot, app)

        await pilot.press("slash", "ctrl+u", *"no such text")
        await wait_until(lambda: "no match" in found(app), 3, pause=pilot.pause)
        await pilot.press("escape")  # in the search line: clears it, the view stays
        await wait_until(lambda: not found(app) and not search.display, 3, pause=pilot.pause)
        assert isinstance(app.screen, LogScreen)
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.dashboard, 3, pause=pilot.pause)


async def test_v_searches_the_answers_and_pages() -> None:
    records = [
        {"sample_id": i, "finish_reason": "stop", "completion_tokens": 50,
         "text": "\n".join(f"answer {i} paragraph {p}: {FILLER}" for p in range(6))}
        for i in range(20)
    ]  # fmt: skip
    records[3]["text"] += f"\nthe {NEEDLE} oldest-hit"
    records[17]["text"] += f"\nthe {NEEDLE} newest-hit"
    lines = tuple(json.dumps(record) for record in records)
    app = GenTuiApp(None, names=["A"])
    async with app.run_test(size=SIZE) as pilot:
        screen = await sample_screen(pilot, app, lines)
        await wait_until(lambda: screen.samples, 10, pause=pilot.pause)
        await wait_until(lambda: "answer 19" in "".join(drawn_rows(app)), 10, pause=pilot.pause)
        await pilot.press("slash", *"gpu-box[/b] LOST", "enter")
        await wait_until(lambda: "1 of 2" in found(app), 3, pause=pilot.pause)
        # newest first: answer 17's line comes before answer 3's
        await wait_until(lambda: in_view(app, "newest-hit"), 3, pause=pilot.pause)
        assert not in_view(app, "oldest-hit")
        await pilot.press("n")
        await wait_until(lambda: "2 of 2" in found(app) and in_view(app, "oldest-hit"), 3,
                         pause=pilot.pause)  # fmt: skip
        at = screen.text.plain.index("gpu-box[/b] lost oldest")
        assert CURRENT_STYLE in styles_at(app, at, at + len("gpu-box[/b] lost"))
        await pilot.press("N")
        await wait_until(lambda: "1 of 2" in found(app) and in_view(app, "newest-hit"), 3,
                         pause=pilot.pause)  # fmt: skip
        await scrolls_with_the_keys(pilot, app)
        await pilot.press("R")  # read again: the search holds over the new text
        await wait_until(lambda: "1 of 2" in found(app) and screen.samples, 10,
                         pause=pilot.pause)  # fmt: skip
