"""Keys from the config (`[keys]`, `[panel] vim`), the command palette, themes and NO_COLOR
(issue 31, power-user requests 6 and 7)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandPalette

from gen_tui.app.cli.launch import panel_options
from gen_tui.app.dialogs.modals import ConfirmScreen, HelpScreen
from gen_tui.app.dialogs.peek import QualityScreen
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.file import load_config
from gen_tui.widgets.key_line import shown_keys
from tests.support.panel_snapshots import T0, run_of, snapshot
from tests.support.polling import wait_until
from tests.support.static_source import StaticSnapshot
from tests.support.tui import SIZE

NAMES = ["A", "B", "C", "D"]


def configured(tmp_path: Path, text: str) -> tuple[GenTuiApp, StaticSnapshot]:
    """The app with the keymap and theme a gen-tui.toml of `text` gives, as launch reads it."""
    path = tmp_path / "gen-tui.toml"
    path.write_text(text)
    static = StaticSnapshot(NAMES, 1e9)
    options: dict[str, Any] = panel_options(path, load_config(path).panel)
    return GenTuiApp(None, names=NAMES, sources=[static], **options), static


async def started(pilot: Any, app: GenTuiApp, static: StaticSnapshot) -> None:
    await wait_until(
        lambda: app.dashboard is not None and app.dashboard.dashboard_up, pause=pilot.pause
    )
    static.show(run_of(*(snapshot(name) for name in NAMES)), now=T0)
    assert app.dashboard is not None
    app.dashboard.refresh_view()
    await pilot.pause()


def selected(app: GenTuiApp) -> str:
    assert app.dashboard is not None
    panel = app.dashboard.selected()
    assert panel is not None
    return panel.dataset


def kill_asked(app: GenTuiApp) -> bool:
    """`k`'s answer on a static source: its confirmation, or a toast saying why not."""
    return isinstance(app.screen, ConfirmScreen) or bool(app._notifications)


def help_text(app: GenTuiApp) -> str:
    """The help's rows as lines of "KEY  WHAT"."""
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    return "\n".join(f"{row.key}  {row.description}" for row in screen.rows)


async def test_keys_table_moves_kill_and_help_says_so(tmp_path: Path) -> None:
    app, static = configured(tmp_path, '[keys]\nkill = "x"\nquality = ["D", "f2"]\n')
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, static)
        await pilot.press("k")
        await pilot.pause()
        assert not kill_asked(app), "k is no longer kill"
        await pilot.press("f2")
        await wait_until(lambda: isinstance(app.screen, QualityScreen), pause=pilot.pause)
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.dashboard, pause=pilot.pause)
        await pilot.press("x")
        await wait_until(lambda: kill_asked(app), pause=pilot.pause)
        if isinstance(app.screen, ConfirmScreen):
            await pilot.press("n")
        await wait_until(lambda: app.screen is app.dashboard, pause=pilot.pause)
        await pilot.press("question_mark")
        await wait_until(lambda: isinstance(app.screen, HelpScreen), pause=pilot.pause)
        text = help_text(app)
        assert re.search(r"^\s*x\s+Kill", text, re.M), text
        assert re.search(r"^\s*D f2\s+Quality", text, re.M), text


async def test_vim_moves_with_hjkl_and_kill_moves_to_x(tmp_path: Path) -> None:
    app, static = configured(tmp_path, "[panel]\nvim = true\n")
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, static)
        assert app.dashboard is not None and app.dashboard.columns == 2
        assert selected(app) == "A"
        footer = {(key, action) for key, action, *_ in shown_keys(app.dashboard)}
        assert {("x", "kill"), ("g", "runs")} <= footer, footer
        assert ("k", "kill") not in footer
        await pilot.press("l")
        assert selected(app) == "B", "l moves right (not the run list)"
        await pilot.press("j")
        assert selected(app) == "D", "j moves down"
        await pilot.press("h")
        assert selected(app) == "C", "h moves left (not the history)"
        await pilot.press("k")
        await pilot.pause()
        assert selected(app) == "A", "k moves up"
        assert not kill_asked(app), "k does not kill with vim = true"
        await pilot.press("down")
        assert selected(app) == "C", "the arrows still move"
        await pilot.press("x")
        await wait_until(lambda: kill_asked(app), pause=pilot.pause)
        if isinstance(app.screen, ConfirmScreen):
            await pilot.press("n")  # kill still asks first
        await wait_until(lambda: app.screen is app.dashboard, pause=pilot.pause)
        await pilot.press("question_mark")
        await wait_until(lambda: isinstance(app.screen, HelpScreen), pause=pilot.pause)
        text = help_text(app)
        assert re.search(r"^\s*x\s+Kill", text, re.M), text
        assert "h j k l" in text, text


async def test_command_palette_runs_the_apps_commands() -> None:
    static = StaticSnapshot(NAMES, 1e9)
    app = GenTuiApp(None, names=NAMES, sources=[static])
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, static)
        assert app.dashboard is not None
        titles = {command.title for command in app.get_system_commands(app.dashboard)}
        wanted = {"Kill", "Resume", "Start", "Pause", "Filter", "Help", "Quit", "Theme"}
        assert wanted | {"Runs", "Quality", "Samples", "Log", "History"} <= titles, titles
        assert "Keys" not in titles, "Textual's key panel: ? is the help here"
        await pilot.press("ctrl+p")
        await wait_until(lambda: isinstance(app.screen, CommandPalette), pause=pilot.pause)
        await pilot.press(*"help")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, HelpScreen), pause=pilot.pause)
        assert "ctrl+p" in help_text(app)


async def test_readonly_palette_leaves_out_the_keys_that_change_a_run() -> None:
    static = StaticSnapshot(NAMES, 1e9)
    app = GenTuiApp(None, names=NAMES, sources=[static], readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, static)
        assert app.dashboard is not None
        titles = {command.title for command in app.get_system_commands(app.dashboard)}
        assert not titles & {"Kill", "Resume", "Start", "Pause"}, titles
        assert {"Help", "Quit", "Theme"} <= titles


async def test_theme_from_config(tmp_path: Path) -> None:
    app, static = configured(tmp_path, '[panel]\ntheme = "nord"\n')
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, static)
        assert app.theme == "nord"
        app.theme = "gruvbox"  # what the palette's Theme does: the panel follows live
        await pilot.pause()
        assert app.current_theme.name == "gruvbox"


SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def colour_codes(sequence: str) -> list[str]:
    """The SGR parameters in `sequence` that set a colour (foreground or background)."""
    found = []
    for match in SGR.finditer(sequence):
        params = [p for p in re.split(r"[;:]", match.group(1)) if p]
        index = 0
        while index < len(params):
            code = int(params[index])
            if code in (38, 48):
                found.append(match.group(0))
                break
            if 30 <= code <= 37 or 40 <= code <= 47 or 90 <= code <= 97 or 100 <= code <= 107:
                found.append(match.group(0))
                break
            index += 1
    return found


async def test_no_color_emits_no_colour_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    static = StaticSnapshot(NAMES, 1e9)
    app = GenTuiApp(None, names=NAMES, sources=[static])
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, static)
        update = app.screen._compositor.render_update(full=True)
        assert update is not None
        sequence = update.render_segments(app.console)
        assert "A" in sequence
        assert colour_codes(sequence) == [], colour_codes(sequence)[:5]
    monkeypatch.delenv("NO_COLOR")
    app = GenTuiApp(None, names=NAMES, sources=[static])
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app, static)
        update = app.screen._compositor.render_update(full=True)
        assert update is not None
        assert colour_codes(update.render_segments(app.console)), "the test sees colours"
