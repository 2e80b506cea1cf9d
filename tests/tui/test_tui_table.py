"""The table view (issue 31, power users' request 1): one line per dataset, sortable, the
default past a dozen datasets, `t` to switch, and the same selection as the grid."""

from __future__ import annotations

from typing import Any

from gen_tui.backends.progress.snapshot import DatasetState, RunSnapshot
from gen_tui.widgets.dataset_panel import DatasetPanel
from gen_tui.widgets.dataset_table import DatasetTable
from tests.support.polling import wait_until
from tests.support.table_app import (
    T0,
    board,
    run_of,
    selected,
    shown,
    snapshot,
    static_app,
    table,
    table_text,
)
from tests.support.tui import SIZE, Notes, badge


async def test_the_table_is_the_default_past_twelve_datasets_and_t_switches() -> None:
    names = [f"D{i:02d}" for i in range(13)]
    app, static = static_app(names)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        assert board(app).table_shown and table(app).display
        assert isinstance(app.focused, DatasetTable)
        lines = table_text(app)
        assert "13 datasets · sort: config (o)" in lines[0]
        assert "name" in lines[1] and "state" in lines[1] and "tok/s" in lines[1]
        row = lines[2]
        assert "D00" in row and "running" in row and "25%" in row and "500k/2M" in row
        assert "20k" in row and "1m15s" in row and "gpu-box:4242" in row
        await pilot.press("t")
        await pilot.pause()
        assert not board(app).table_shown and not table(app).display
        assert isinstance(app.focused, DatasetPanel)
    few, static = static_app(["A", "B"])
    async with few.run_test(size=SIZE) as pilot:
        await shown(pilot, few, static, run_of(snapshot("A"), snapshot("B")))
        assert not board(few).table_shown
        await pilot.press("t")
        await pilot.pause()
        assert board(few).table_shown
        assert [line.split()[0] for line in table_text(few)[2:4]] == ["A", "B"]


async def test_the_selection_is_the_same_in_the_grid_and_the_table() -> None:
    notes = Notes()
    names = ["A", "B", "C", "D"]
    app, static = static_app(names)
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        await pilot.press("right")
        assert selected(app) == "B"
        await pilot.press("t")
        await pilot.pause()
        assert selected(app) == table(app).current() == "B"
        await pilot.press("down")
        assert selected(app) == "C"
        await pilot.press("k")  # nothing here can stop it: it says so, naming the dataset
        await wait_until(lambda: notes.items, pause=pilot.pause)
        assert notes.find("C") and not notes.find("B"), notes.items
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.focused, DatasetPanel) and app.focused.dataset == "C"


async def test_o_sorts_the_table_and_its_header_says_by_what() -> None:
    names = ["slow", "done", "stale", "fast"]
    app, static = static_app(names, stale_after_s=30)

    def run(at: float) -> RunSnapshot:
        return run_of(
            snapshot("slow", tok_s=1_000.0, tokens=100_000, eta_s=1900.0, last_record_at=at),
            snapshot("done", state=DatasetState.DONE, tokens=2_000_000, eta_s=None),
            snapshot("stale", tok_s=0.0, eta_s=None, last_record_at=T0 - 500),
            snapshot("fast", tok_s=90_000.0, tokens=1_500_000, eta_s=6.0, last_record_at=at),
        )

    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run(T0))
        static.show(run(T0 + 100), now=T0 + 100)  # seen active 100 s with no record: stale
        board(app).refresh_view()
        await pilot.press("t")
        await pilot.pause()

        def order() -> list[str]:
            return [line.split()[0] for line in table_text(app)[2:6]]

        assert order() == names
        expected = {
            "state": ["stale", "slow", "fast", "done"],
            "% done": ["done", "fast", "stale", "slow"],
            "ETA": ["fast", "slow", "done", "stale"],
            "tok/s": ["fast", "slow", "done", "stale"],
            "config": names,
        }
        for sort, rows in expected.items():
            await pilot.press("o")
            await pilot.pause()
            assert f"sort: {sort} (o)" in table_text(app)[0]
            assert f"{sort}↓" in table_text(app)[1] or sort in ("ETA", "% done", "config")
            assert order()[: len(rows)] == rows, sort
        assert selected(app) == "slow"  # the first row when t was pressed, wherever it went


async def test_64_datasets_fit_the_table_at_80x24_and_every_row_is_reachable() -> None:
    names = [f"B{i:02d}_dataset" for i in range(64)]
    app, static = static_app(names)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        assert board(app).table_shown
        seen = set()
        for index, name in enumerate(names):
            assert selected(app) == name
            lines = table_text(app)
            assert "sort:" in lines[0]  # the header stays at the top
            row = next(line for line in lines[2:] if name in line)
            assert "running" in row and "gpu-box" in row
            seen.update(line.split()[0] for line in lines[2:] if line.strip())
            if index < len(names) - 1:
                await pilot.press("down")
        assert seen == set(names)
        await pilot.press("home")
        assert selected(app) == names[0] and names[0] in table_text(app)[2]
        await pilot.press("end")
        assert selected(app) == names[-1] and names[-1] in table_text(app)[-1]


async def test_table_rows_show_names_and_hosts_as_text_never_markup() -> None:
    names = ["[b]bold[/b]\x1b[31m", "plain"]
    app, static = static_app(names)
    hostile = snapshot(names[0], host="[red]evil[/red]\nbox")
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(hostile, snapshot("plain")))
        await pilot.press("t")
        await pilot.pause()
        # two hosts: each has a line of its own (its name as text too), then its rows
        host, row = table_text(app)[2:4]
        assert host.startswith(" [red]evil[/red] box · 1 dataset"), host
        assert "[b]bold[/b]" in row and "\x1b" not in row
        assert "[red]evil" in row


async def test_a_new_count_repaints_only_its_row() -> None:
    """The table is not rebuilt at each refresh: a dataset's new count repaints its line."""
    names = [f"D{i:02d}" for i in range(20)]
    app, static = static_app(names)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        rows = table(app)
        painted: list[tuple[object, ...]] = []
        repaint = rows.refresh

        def spy(*regions: Any, **kwargs: Any) -> Any:
            painted.append(regions)
            return repaint(*regions, **kwargs)

        rows.refresh = spy  # type: ignore[method-assign]
        board(app).refresh_view()  # nothing new: nothing repaints
        assert painted == []
        changed = [snapshot(n, tokens=900_000 if n == "D03" else 500_000) for n in names]
        static.show(run_of(*changed), now=T0)
        board(app).refresh_view()
        assert [[(r.y, r.height) for r in regions] for regions in painted] == [[(5, 1)]]
        await pilot.pause()
        assert "900k/2M" in table_text(app)[5]


async def test_a_refresh_makes_the_rows_in_sight_and_a_row_out_of_sight_shows_its_news() -> None:
    """Over 64 datasets at 80x24 a refresh makes the 19 rows in sight, not 64 (issue 31:
    the table's cost); a row that changed out of sight shows its new count once scrolled to."""
    names = [f"B{i:02d}" for i in range(64)]
    app, static = static_app(names)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        rows = table(app)
        in_sight = rows.size.height - 2
        made: list[str] = []
        make = rows.row_line

        def spy(row: Any, width: int, cursor: bool) -> Any:
            made.append(row.name)
            return make(row, width, cursor)

        rows.row_line = spy  # type: ignore[method-assign]
        changed = [snapshot(n, tokens=900_000 if n == "B50" else 500_000) for n in names]
        static.show(run_of(*changed), now=T0)
        board(app).refresh_view()
        assert made == names[:in_sight], made
        await pilot.press("end")
        await pilot.pause()
        row = next(line for line in table_text(app) if line.startswith(" B50 "))
        assert "900k/2M" in row, row


async def test_the_name_column_is_as_wide_as_the_longest_name_not_the_screen() -> None:
    """At 160 columns the name column took ~80 cells and pushed the figures far right of
    the demo's names (9 characters); it is the longest name's width, within bounds."""
    names = [f"B{i}_data" for i in range(1, 10)] + ["B10_longest_name"]
    app, static = static_app(names)
    async with app.run_test(size=(160, 48)) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in names)))
        await pilot.press("t")
        await pilot.pause()
        lines = table_text(app)
        assert lines[1].index("state") <= len("B10_longest_name") + 3, lines[1]
        for line in lines[2:12]:
            assert line.index("running") == lines[1].index("state"), line
    long = ["x" * 150, "short"]
    app, static = static_app(long)
    async with app.run_test(size=(160, 48)) as pilot:
        await shown(pilot, app, static, run_of(*(snapshot(n) for n in long)))
        await pilot.press("t")
        await pilot.pause()
        row = next(line for line in table_text(app) if "short" in line)
        assert "running" in row and "gpu-box:4242" in row, row  # the figures still show


async def test_the_table_says_the_badge_s_words_for_each_state() -> None:
    """Issue 31, the retry at 160x48: the table said "done" where the badge said "budget
    reached" for the same dataset (the table cut a badge longer than its column to its kind).
    One word for one state: the table's state cell is the badge's, less its key hint."""
    names = ["reached", "stale"]
    app, static = static_app(names, stale_after_s=30)

    def run(at: float) -> RunSnapshot:
        return run_of(
            snapshot("reached", state=DatasetState.DONE, tokens=2_000_000, eta_s=None),
            snapshot("stale", tok_s=0.0, eta_s=None, last_record_at=T0 - 500),
        )

    async with app.run_test(size=(160, 48)) as pilot:
        await shown(pilot, app, static, run(T0))
        static.show(run(T0 + 100), now=T0 + 100)
        board(app).refresh_view()
        await pilot.pause()
        badges = {name: badge(app, name) for name in names}
        assert badges == {"reached": "budget reached", "stale": "stale · press k"}, badges
        await pilot.press("t")
        await pilot.pause()
        cells = {line.split()[0]: line for line in table_text(app)[2:4]}
        assert "budget reached" in cells["reached"] and " done " not in cells["reached"], cells
        assert " stale " in cells["stale"] and "press k" not in cells["stale"], cells
