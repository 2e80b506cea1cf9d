"""The run list (`l`, `g` with vim) follows the dashboard's key map (issue 31): with
`[panel] vim = true` the panel's `k` moves and kill is `x`, and so they are in the list
(`k` there killed); `[keys]` moves its kill, resume and start with the dashboard's, and a
key that clashes with one of the list's own is one line before the window.

Two real stand-in runs of a user's script writing the watched folder, the real app on the
local host.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gen_tui.app.cli.launch import panel_options
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.dialogs.run_list import RunsScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.widgets.key_line import shown_keys
from gen_tui.widgets.run_table import RunTable
from tests.support.polling import wait_until
from tests.support.runs import standin_argv
from tests.support.tui import SIZE


def _options(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "gen-tui.toml"
    path.write_text(text)
    return panel_options(path, load_config(path).panel)


@pytest.fixture
def two_runs(tmp_path: Path, standin: Path) -> Iterator[tuple[Path, list[int]]]:
    out = tmp_path / "out"
    out.mkdir()
    argvs = [standin_argv(standin, str(out), name) for name in ("B1", "B2")]
    runs = [
        subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True) for argv in argvs
    ]
    yield out, [run.pid for run in runs]
    for run in runs:
        run.kill()
        run.wait()


async def _listed(pilot: Any, app: GenTuiApp, key: str, pids: list[int]) -> RunTable:
    """The run list opened with `key`, once it shows both runs."""
    monitor = lambda: app.links[0].monitor  # noqa: E731
    await wait_until(
        lambda: monitor() and {r.pid for r in monitor().runs} >= set(pids), 30, pause=pilot.pause
    )
    await pilot.press(key)
    screen = await wait_until(
        lambda: isinstance(app.screen, RunsScreen) and app.screen, 5, pause=pilot.pause
    )
    table = screen.query_one(RunTable)
    await wait_until(lambda: table.row_count == 2, 10, pause=pilot.pause)
    return table


async def test_vim_moves_with_j_and_k_in_the_run_list_and_kills_with_x(
    tmp_path: Path, two_runs: tuple[Path, list[int]]
) -> None:
    out, pids = two_runs
    options = _options(tmp_path, "[panel]\nvim = true\n")
    app = GenTuiApp(None, hosts=[host_source("local", str(out))], **options)
    try:
        async with app.run_test(size=SIZE) as pilot:
            table = await _listed(pilot, app, "g", pids)
            screen = app.screen
            keys = {(key, action) for key, action, *_ in shown_keys(screen)}
            assert ("x", "kill") in keys and ("k", "kill") not in keys, keys
            table.move_cursor(row=0)
            await pilot.press("j")
            await wait_until(lambda: table.cursor_row == 1, 3, "j moves down", pause=pilot.pause)
            await pilot.press("k")
            await wait_until(lambda: table.cursor_row == 0, 3, "k moves up", pause=pilot.pause)
            await pilot.pause(0.3)
            assert app.screen is screen, "k asked to kill a run"
            await pilot.press("x")
            confirm = await wait_until(
                lambda: isinstance(app.screen, ConfirmScreen) and app.screen, 5, pause=pilot.pause
            )
            body = str(confirm.query_one("#confirm-body").render())
            assert any(str(pid) in body for pid in pids), body
            await pilot.press("n")
            await wait_until(lambda: app.screen is screen, 5, pause=pilot.pause)
            await pilot.press("g")  # the key that opened the list closes it
            await wait_until(lambda: app.screen is app.dashboard, 5, pause=pilot.pause)
    finally:
        app.stop_links()
        for link in app.links:
            link.done.wait(timeout=30)


async def test_keys_moves_the_run_lists_kill_with_the_panels(
    tmp_path: Path, two_runs: tuple[Path, list[int]]
) -> None:
    out, pids = two_runs
    options = _options(tmp_path, '[keys]\nkill = "ctrl+k"\n')
    app = GenTuiApp(None, hosts=[host_source("local", str(out))], **options)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await _listed(pilot, app, "l", pids)
            screen = app.screen
            await pilot.press("k")
            await pilot.pause(0.3)
            assert app.screen is screen, "k still kills in the list"
            await pilot.press("ctrl+k")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), 5, pause=pilot.pause)
            await pilot.press("n")
    finally:
        app.stop_links()
        for link in app.links:
            link.done.wait(timeout=30)


def test_a_key_taken_in_the_run_list_is_one_line(tmp_path: Path) -> None:
    """`i` is free on the dashboard but opens a run's details in the list: kill there would
    be unreachable."""
    with pytest.raises(ConfigError) as caught:
        _options(tmp_path, '[keys]\nkill = "i"\n')
    said = str(caught.value)
    assert said.endswith("keys.kill = 'i': i is already runs.details's key in the run list"), said
