"""Someone else's text in the control panel: markup and terminal escapes from data.

Sample ids, server errors, host failures, progress.json messages and command lines reach
toasts, the event log, the panels, the header and the dialogs. Each test feeds hostile text
through the path real data takes (an engine event, a host whose survey fails, a snapshot, a
process's command line) into the real app under Pilot, then reads what the widgets drew.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pytest
from textual.content import Content
from textual.widgets import Label, RichLog, Static
from textual.widgets._toast import Toast

from gen_tui.app.cli.launch import main
from gen_tui.app.dashboard.sources import Confirm, Plan
from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen, ResumeTarget, StartScreen
from gen_tui.app.dialogs.run_list import RunsScreen
from gen_tui.app.host_links import kill_question
from gen_tui.app.host_sources import HostSource
from gen_tui.app.messages import EngineEvent
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.hosts import RunIdentity
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.widgets.dataset_panel import DatasetPanel, PanelView
from gen_tui.widgets.header import HeaderView, RunHeader, header_parts
from tests.support.polling import wait_until
from tests.support.static_source import StaticSnapshot

MARKUP = "model [/x] not found [bold]loud[/bold] [link=https://evil.example]click[/link]"
"""Rich/Textual markup that ends the app when parsed (`[/x]` closes nothing)."""
ESCAPES = "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[H\x9b31m\u202eevil"
"""A window title, a clipboard write (OSC 52), clear screen, cursor home, a C1 CSI, bidi."""
HOSTILE = f"{MARKUP} {ESCAPES}"
CONTROL_BYTES = ("\x1b", "\x07", "\x9b", "\u202e")
SIZE = (160, 50)  # tall enough for the event log pane


def assert_plain(text: str, where: str) -> None:
    """The markup shows literally, and no control character is left to reach the terminal."""
    assert "[/x]" in text, f"{where}: the literal text is missing: {text!r}"
    assert "[bold]loud[/bold]" in text, f"{where}: markup was interpreted: {text!r}"
    assert "[link=https://evil.example]" in text, f"{where}: markup was interpreted: {text!r}"
    for char in CONTROL_BYTES:
        assert char not in text, f"{where}: {char!r} reaches the screen: {text!r}"


class FailingHost(HostSource):
    """A watched host whose connection fails with an error quoting hostile server text."""

    remote = True

    def __init__(self) -> None:
        super().__init__(label="gpu-box")

    async def open(self, stack: Any) -> Any:
        raise RuntimeError(HOSTILE)


class HostileRun(StaticSnapshot):
    """A dataset whose progress.json message, host and writer's command line are hostile."""

    def claims(self, name: str, action: str) -> bool:
        return True

    def kill(self, name: str, view: PanelView | None) -> Plan:
        identity = RunIdentity("local", 4242, 1.0, "", ("python", "-c", HOSTILE, "gen-tui", "run"))
        return Confirm("Kill run?", kill_question(identity, [name], "-", 5.0), "Kill", lambda: None)


def hostile_snapshot() -> RunSnapshot:
    now = time.time()
    snap = DatasetSnapshot(
        name="B1", state=DatasetState.ACTIVE, tokens=10, samples=1, max_tokens=100,
        max_samples=None, budget_mode="tokens", inflight=1, errors=0, malformed=0,
        mean_tokens=10.0, tok_s=1.0, samples_s=0.1, eta_s=90.0, resumed_tokens=0,
        resumed_samples=0, started_at=now, updated_at=now, last_record_at=now, pid=4242,
        host="gpu\x1b]0;host\x07box", message=HOSTILE,
    )  # fmt: skip
    return RunSnapshot((snap,), 1, 1, 1.0, 1.0, 1.0, False, False)


def toast_texts(app: GenTuiApp) -> list[str]:
    return [toast.render().plain for toast in app.screen.query(Toast)]


async def test_hostile_text_is_shown_literally_and_without_escapes() -> None:
    source = HostileRun(["B1"], stale_after_s=600)
    source.show(hostile_snapshot())
    app = GenTuiApp(None, hosts=[FailingHost()], sources=[source])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        dashboard = app.dashboard
        assert dashboard is not None
        # An engine warning and error quoting a sample id and a server's error body.
        app.post_message(EngineEvent("warning", f"sample {HOSTILE}: skipped"))
        app.post_message(EngineEvent("error", f"server said: {HOSTILE}"))
        # The host's failure arrives from its link's thread (a toast and an event).
        link = app.links[0]
        await wait_until(
            lambda: link.failure is not None and len(app.events) >= 3, pause=pilot.pause
        )
        await pilot.pause(0.3)
        assert app.is_running and app.return_code is None

        toasts = toast_texts(app)
        assert len(toasts) >= 3, toasts
        for text in toasts:
            assert_plain(text, "toast")

        log = dashboard.query_one("#events", RichLog)
        assert log.display, "the event log pane should be on screen at this size"
        # The log wraps long events: an event is its strips joined again.
        lines = [strip.text for strip in log.lines]
        events = " ".join(line.rstrip() for line in lines).split(f" {time.strftime('%H')}:")
        assert len([event for event in events if "[/x]" in event]) >= 3, lines
        for event in events:
            if "[/x]" in event:
                assert_plain(event, "event log")

        panel = dashboard.query_one(DatasetPanel)
        drawn = "\n".join(panel.render_line(y).text for y in range(panel.size.height))
        assert "[/x]" in drawn and "gpu" in drawn, drawn
        for char in CONTROL_BYTES:
            assert char not in drawn, f"panel: {char!r} reaches the screen: {drawn!r}"

        # The header names the writer's host; a failed host's state too, where it fits.
        header = dashboard.query_one(RunHeader).render().plain
        assert "pid 4242 on gpu" in header, header
        failed = " ".join(header_parts(HeaderView(hosts=(("gpu-box", link.state),))))
        assert_plain(failed, "header host state")
        for char in CONTROL_BYTES:
            assert char not in header, f"header: {char!r} reaches the screen: {header!r}"

        # The kill confirmation quotes the process's own command line.
        await pilot.press("k")
        confirm = await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        assert confirm
        body = app.screen.query_one("#confirm-body", Static).render()
        assert_plain(str(getattr(body, "plain", body)), "kill confirmation")
        await pilot.press("n")
        await wait_until(lambda: not isinstance(app.screen, ConfirmScreen), pause=pilot.pause)

        # The run list's host lines quote the failed host's state.
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, RunsScreen), pause=pilot.pause)
        await pilot.pause(0.1)
        hosts = app.screen.query_one("#runs-hosts", Static).render()
        assert "gpu-box: failed" in str(getattr(hosts, "plain", hosts)), hosts
        assert_plain(str(getattr(hosts, "plain", hosts)), "run list hosts")
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert app.is_running and app.return_code is None


async def test_dialog_titles_and_labels_show_names_and_commands_literally() -> None:
    """The resume and start dialogs quote a dataset name, a host name and a command line."""
    target = ResumeTarget(
        name=f"B1 {MARKUP}", tokens=10, max_tokens=100, max_samples=None, tok_s=1.0,
        running=False, where=f"on gpu-box, as launched: python -c {HOSTILE}",
    )  # fmt: skip
    app = GenTuiApp(None)
    async with app.run_test(size=SIZE) as pilot:
        for screen in (ResumeScreen(target), StartScreen(f"gpu {HOSTILE}", "how")):
            app.push_screen(screen)
            await wait_until(lambda screen=screen: app.screen is screen, pause=pilot.pause)
            await pilot.pause(0.1)
            dialog = screen.query_one(".dialog")
            # The getter gives the title as markup (escaped): what is drawn is its plain text.
            assert_plain(Content.from_markup(dialog.border_title or "").plain, "dialog title")
            if isinstance(screen, ResumeScreen):
                where = screen.query_one("#resume-where", Label).render()
                assert_plain(str(getattr(where, "plain", where)), "resume dialog")
            screen.dismiss(None)
            await wait_until(lambda screen=screen: app.screen is not screen, pause=pilot.pause)
        assert app.is_running and app.return_code is None


def test_a_config_error_quoting_escapes_reaches_stderr_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gen-tui.toml"
    path.write_text('"\\u001b]0;pwned\\u0007\\u001b]52;c;ZXZpbA==\\u0007" = 1\n')
    code = main(argparse.Namespace(tui_demo=False, tui_config=path))
    err = capsys.readouterr().err
    assert code == 2 and "pwned" in err, err
    for char in CONTROL_BYTES:
        assert char not in err, f"{char!r} reaches the terminal: {err!r}"
