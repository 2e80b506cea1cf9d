"""The `/` filter by state (issue 31, power users' request 8): `state:stale` and the like,
followed live as states change, and a selection that survives clearing a filter."""

from __future__ import annotations

from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetState, RunSnapshot
from gen_tui.widgets.dataset_panel import DatasetPanel
from gen_tui.widgets.dataset_table import DatasetTable
from tests.support.table_app import T0, board, run_of, selected, shown, snapshot, static_app
from tests.support.tui import SIZE


def visible(app: GenTuiApp) -> list[str]:
    return [panel.dataset for panel in board(app).panels(visible_only=True)]


def fleet(at: float, stale: str) -> RunSnapshot:
    """A, B and C running, `stale` with no record since T0 - 500, and D done."""
    return run_of(
        *(snapshot(n, last_record_at=T0 - 500 if n == stale else at) for n in "ABC"),
        snapshot("D", state=DatasetState.DONE, tokens=2_000_000, eta_s=None),
    )


async def test_state_filter_shows_the_stale_datasets_and_follows_their_state() -> None:
    app, static = static_app(list("ABCD"), stale_after_s=30)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, fleet(T0, stale="B"))
        static.show(fleet(T0 + 100, stale="B"), now=T0 + 100)
        board(app).refresh_view()
        await pilot.press("slash", *"state:stale", "enter")
        await pilot.pause()
        assert visible(app) == ["B"]
        assert isinstance(app.focused, DatasetPanel) and app.focused.dataset == "B"
        static.show(fleet(T0 + 200, stale="C"), now=T0 + 200)  # B writes again, C stops
        board(app).refresh_view()
        await pilot.pause()
        assert visible(app) == ["C"]
        await pilot.press("slash", "ctrl+u", *"state:done", "enter")
        await pilot.pause()
        assert visible(app) == ["D"]
        await pilot.press("slash", "ctrl+u", *"state:run", "enter")
        await pilot.pause()
        assert visible(app) == ["A", "B"]
        await pilot.press("t")  # the table shows what the filter lets through
        await pilot.pause()
        table = app.screen.query_one("#table", DatasetTable)
        assert [row.name for row in table.rows] == ["A", "B"]
        await pilot.press("slash", "ctrl+u", *"A state:run state:done", "enter")
        await pilot.pause()
        assert [row.name for row in table.rows] == ["A"]


async def test_the_selection_survives_clearing_a_filter() -> None:
    names = ["A", "B1", "B2", "C"]
    app, static = static_app(names)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        await pilot.press("slash", "B", "enter", "right")
        assert selected(app) == "B2"
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert visible(app) == names
        assert isinstance(app.focused, DatasetPanel) and app.focused.dataset == "B2"
        await pilot.press("right")  # C, then a filter typed and cleared without Enter
        assert selected(app) == "C"
        await pilot.press("slash", "B", "escape")
        await pilot.pause()
        assert isinstance(app.focused, DatasetPanel) and app.focused.dataset == "C"


async def test_the_selection_survives_clearing_a_filter_in_the_table() -> None:
    names = ["A", "B1", "B2", "C"]
    app, static = static_app(names)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        await pilot.press("t", "slash", "B", "enter", "down")
        await pilot.pause()
        assert selected(app) == "B2"
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert isinstance(app.focused, DatasetTable)
        assert selected(app) == "B2"
        await pilot.press("down")
        await pilot.press("slash", *"state:stale", "escape")  # hides C for a moment
        await pilot.pause()
        assert selected(app) == "C"


async def test_escape_clears_a_kept_filter_as_the_empty_board_says() -> None:
    """Seen in tmux at 80x24 (issue 31, tried again): `/state:stale` Enter, then `k` on the
    stale run; it stopped, so no panel matched and the board said "No dataset matches the
    filter (/ to change it, Esc to clear)", but Escape did nothing: the filter was kept and
    the board stayed empty. Escape after Enter shows every dataset again, panels or none."""
    names = ["A", "B1", "B2", "C"]
    app, static = static_app(names)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        await pilot.press("slash", *"nothing", "enter")
        await pilot.pause()
        assert visible(app) == []
        await pilot.press("escape")
        await pilot.pause()
        assert visible(app) == names
        assert not board(app).filter_bar.display
        await pilot.press("slash", "B", "enter", "right")  # a kept filter with panels shown
        await pilot.pause()
        assert selected(app) == "B2"
        await pilot.press("escape")
        await pilot.pause()
        assert visible(app) == names
        assert isinstance(app.focused, DatasetPanel) and app.focused.dataset == "B2"
        await pilot.press("escape")  # no filter: Escape changes nothing
        await pilot.pause()
        assert visible(app) == names and selected(app) == "B2"
