"""A snapshot of the servers view (pytest-textual-snapshot) at 160×48, fed fixed rows: one
server in each state whose words do not depend on the clock (healthy, exited, down,
failed, stopped, not ours), with a hostile log line drawn as data. Update the SVG with
`pytest tests/tui/test_tui_servers_view_snapshot.py --snapshot-update` after a deliberate
change, and look at it before committing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot

from gen_tui.app.dialogs.servers import ServersScreen
from gen_tui.app.tui import TCSS_PATH
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.view import Holder, ServerRow
from gen_tui.backends.store.tails import Tail
from tests.support.polling import wait_until

pytest.importorskip("pytest_textual_snapshot")


def _row(name: str, state: ServerState, detail: str = "", **fields: Any) -> ServerRow:
    port = 30000 + sum(map(ord, name)) % 100
    values: dict[str, Any] = {
        "url": f"http://127.0.0.1:{port}",
        "host": "local",
        "since": 1_700_000_000.0,
        "ref": None,
        "started_at": None,
        "restarts": 0,
        "last_line": "",
        "argv": ("python", "-m", "sglang.launch_server", "--port", str(port)),
        "port": port,
    }
    values.update(fields)
    return ServerRow(name, state=state, detail=detail, **values)


ROWS = (
    _row("gpu0", ServerState.HEALTHY, "answered after 58 s", ref="8123", restarts=1, gpus="0,1",
         last_line='INFO: 127.0.0.1 - "POST /generate HTTP/1.1" 200 OK'),
    _row("gpu1", ServerState.EXITED, "pid 8124 was killed by SIGKILL; its log's last line: -",
         restarts=2, last_line="\x1b[31m[/bold] not markup\x1b[0m"),
    _row("gpu2", ServerState.DOWN, "5 restarts in the last hour", restarts=5),
    _row("gpu3", ServerState.FAILED, "never came up: no such file: /models/x"),
    _row("gpu4", ServerState.STOPPED, "pid 8125 stopped"),
    _row("old", ServerState.NOT_OURS, "answers, but gen-tui did not start it",
         holder=Holder(4711, "bob", "python -m sglang.launch_server")),
)  # fmt: skip


class Fixed:
    """A ServerControl over fixed rows that does nothing."""

    rows = ROWS
    problem = ""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def start(self, name: str) -> None:
        self.calls.append(("start", name))

    def stop(self, name: str) -> None:
        self.calls.append(("stop", name))

    def restart(self, name: str, argv: Sequence[str] | None = None) -> None:
        self.calls.append(("restart", name))

    def save_flags(self, name: str, argv: Sequence[str]) -> None:
        self.calls.append(("save", name))

    def log_tail(self, name: str, lines: int) -> Tail:
        return Tail()


class ViewApp(App[None]):
    CSS_PATH = str(TCSS_PATH)

    def __init__(self, *, readonly: bool = False) -> None:
        super().__init__()
        self.control = Fixed()
        self.readonly = readonly

    def on_mount(self) -> None:
        loads = {"http://127.0.0.1:30080": "run 64 q 3 KV 82% 2.95k tok/s retr 0 cache 41%"}
        screen = ServersScreen(self.control, lambda: loads, lambda _name: None,
                               readonly=self.readonly)  # fmt: skip
        self.push_screen(screen)


async def _settle(pilot: Pilot[None]) -> None:
    await pilot.pause(0.3)


def test_servers_view_160x48(snap_compare: Any) -> None:
    assert snap_compare(ViewApp(), terminal_size=(160, 48), run_before=_settle)


async def test_readonly_leaves_the_servers_alone() -> None:
    """--readonly: start, stop, restart and edit do nothing (the keys show dimmed)."""
    for readonly, expected in ((True, []), (False, [("stop", "gpu0"), ("start", "gpu0")])):
        app = ViewApp(readonly=readonly)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.2)
            for key in ("k", "s"):
                await pilot.press(key)
            await pilot.pause(0.2)
            assert app.control.calls == expected
            await pilot.press("r")
            await pilot.pause(0.2)
            assert len(app.control.calls) == len(expected) + (0 if readonly else 1)


def _screen_lines(app: App[None]) -> list[str]:
    """The terminal's lines as the user sees them (what the compositor draws)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_at_80_columns_state_and_restarts_show_and_the_log_line_in_full() -> None:
    """Tried at 80 columns (issue 32): the table was 9 fixed-width columns wider than the
    terminal, so restarts, load and the log's last line were off to the right (and at 120
    the log line was cut to 19 characters). Now name, state, restarts and uptime show
    without scrolling, and the selected server's log line is said in full under it."""
    app = ViewApp()
    async with app.run_test(size=(80, 24)) as pilot:

        def log_line() -> str:
            return "\n".join(_screen_lines(app)).partition("its log: ")[2]

        await wait_until(lambda: "POST /generate" in log_line(), 10, pause=pilot.pause)
        lines = _screen_lines(app)
        header = next(line for line in lines if line.lstrip().startswith("server"))
        assert "restarts" in header and "up" in header.split(), header
        for row in ROWS:
            line = next(line for line in lines if line.lstrip().startswith(row.name + " "))
            words = line.split()
            assert words[1].startswith(str(row.state).split()[0]), line
            assert str(row.restarts) in words, line
        said = "\n".join(lines)
        assert 'its log: INFO: 127.0.0.1 - "POST /generate HTTP/1.1" 200 OK' in said, said
        await pilot.press("down")  # gpu1: its hostile line drawn as data, escapes gone
        # Drawn once the cursor's move reaches the detail (a loaded machine took over 0.3 s).
        await wait_until(
            lambda: "POST /generate" not in log_line(), 10, "gpu1's log line", pause=pilot.pause
        )
        said = "\n".join(_screen_lines(app))
        assert "\x1b" not in said
        assert "[/bold] not markup" in log_line(), said
