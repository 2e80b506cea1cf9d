"""`--demo` and `--host` without `--config` take the look and keys of the user's config
(issue 31): the `[panel]` and `[keys]` of the gen-tui.toml plain `gen-tui` finds (the one
in the working folder, else the user's config folder), so theme, vim and remaps hold in
every mode. They read no other table of it: a demo runs nothing the file describes.

`main` as the command line calls it, with the app's `run` replaced by one that records the
app it was given; then that app under Pilot, where the keys are what the user pressed.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gen_tui.app.cli.launch import main
from gen_tui.app.cli.parser import build_parser
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.tui import GenTuiApp
from tests.support.polling import wait_until

MINE = """\
[run]
budget = "a setting this version does not know"

[panel]
vim = true
theme = "nord"

[keys]
filter = "f"
"""


@pytest.fixture
def opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[GenTuiApp]]:
    """The apps `main` opens (not run), in a working folder and a config folder of their
    own, with the demo's temporary folder under `tmp_path`."""
    apps: list[GenTuiApp] = []

    def run(app: GenTuiApp) -> int:
        apps.append(app)
        for link in app.links:  # never started: nothing for the exit to wait for
            link.done.set()
        return 0

    monkeypatch.setattr(GenTuiApp, "run", run)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield apps


def _launch(*argv: str) -> int:
    return main(build_parser().parse_args(list(argv)))


def _looks_mine(app: GenTuiApp) -> None:
    assert app.theme == "nord"
    assert app.keymap["kill"] == "x" and app.keymap["move.up"] == "up,k"
    assert app.keymap["filter"] == "f"


def test_demo_takes_the_working_folders_config_panel_and_keys(
    tmp_path: Path, opened: list[GenTuiApp]
) -> None:
    (tmp_path / "work" / "gen-tui.toml").write_text(MINE)
    assert _launch("--demo") == 0
    (app,) = opened
    _looks_mine(app)


def test_host_takes_the_user_config_folders_panel_and_keys(
    tmp_path: Path, opened: list[GenTuiApp]
) -> None:
    folder = tmp_path / "config" / "gen-tui"
    folder.mkdir(parents=True)
    (folder / "gen-tui.toml").write_text(MINE)
    out = tmp_path / "out"
    out.mkdir()
    assert _launch("--host", "local", "--remote-dir", str(out)) == 0
    (app,) = opened
    _looks_mine(app)


def test_without_a_config_file_the_defaults_hold(opened: list[GenTuiApp]) -> None:
    assert _launch("--demo") == 0
    (app,) = opened
    assert app.keymap == {} and app.theme == "textual-dark"


def test_a_bad_key_in_the_users_config_is_one_line_before_the_demo(
    tmp_path: Path, opened: list[GenTuiApp], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "work" / "gen-tui.toml"
    path.write_text('[keys]\nkill = "q"\n')
    assert main(argparse.Namespace(tui_demo=True, tui_config=None)) == 2
    assert not opened
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"gen-tui: error: {path}: keys.kill = 'q': q is already quit's key"


async def test_the_demo_answers_to_the_users_keys(tmp_path: Path, opened: list[GenTuiApp]) -> None:
    """The keys as pressed in the demo the user's config shaped: j moves, k moves back (it
    kills nothing), x asks to kill; the theme is the user's."""
    from gen_tui.app.cli.launch import demo_app, user_panel

    (tmp_path / "work" / "gen-tui.toml").write_text(MINE)
    app = demo_app(tmp_path / "demo", autostart=False, **user_panel())
    (tmp_path / "demo").mkdir()
    async with app.run_test(size=(120, 40)) as pilot:
        dashboard = await wait_until(lambda: app.dashboard, 10, pause=pilot.pause)
        await wait_until(lambda: dashboard.selected() is not None, 30, pause=pilot.pause)
        assert app.theme == "nord"
        first: Any = dashboard.selected()
        await pilot.press("j")
        await wait_until(lambda: dashboard.selected() is not first, 3, pause=pilot.pause)
        await pilot.press("k")
        await wait_until(lambda: dashboard.selected() is first, 3, pause=pilot.pause)
        assert not isinstance(app.screen, ConfirmScreen), "k moved: it asked to kill nothing"
        await pilot.press("x")
        await pilot.pause(0.3)
        asked = isinstance(app.screen, ConfirmScreen) or bool(app._notifications)
        assert asked, "x is kill: its confirmation, or a line saying why not"
    app.stop_links()  # the demo's stale run, started by its link, goes with the app
    for link in app.links:
        assert link.done.wait(timeout=40), f"{link.name} still running"
