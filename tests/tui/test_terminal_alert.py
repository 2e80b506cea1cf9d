"""The bell and the desktop notification go through Textual's driver, in order with the
frames, and only where the terminal has a notification."""

from __future__ import annotations

from typing import Any

import pytest

from gen_tui.app import terminal_alert


class Driver:
    def __init__(self) -> None:
        self.written: list[str] = []

    def write(self, data: str) -> None:
        self.written.append(data)


class FakeApp:
    """What ring() touches of a running App: a real one under Pilot is headless."""

    def __init__(self) -> None:
        self._driver = Driver()
        self.is_headless = False

    def bell(self) -> None:
        self._driver.write("\a")


@pytest.mark.parametrize(("term", "notified"), [("foot", True), ("xterm-256color", False)])
def test_ring_writes_bell_then_notification(
    monkeypatch: pytest.MonkeyPatch, term: str, notified: bool
) -> None:
    for name in ("TERM_PROGRAM", "TMUX", "VTE_VERSION", "WT_SESSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", term)
    app: Any = FakeApp()
    terminal_alert.ring(app, "gen-tui: B1", "budget reached\x1b[2J")
    written = app._driver.written
    assert written[0] == "\a"
    if notified:
        assert written[1] == "\x1b]777;notify;gen-tui: B1;budget reached?[2J\x07"
    else:
        assert written == ["\a"]


async def test_ring_under_pilot_writes_nothing_to_a_headless_screen() -> None:
    from textual.app import App

    app: App[None] = App()
    async with app.run_test() as pilot:
        terminal_alert.ring(app, "t", "b")  # headless: neither bell nor sequence, no error
        await pilot.pause()
        assert app.is_headless
