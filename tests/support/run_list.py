"""The run list (`l`) under Pilot, as the tests of other folders' runs drive it: the runs a
host's monitor lists, the list's rows and title, `k`'s confirmation, and the app's host
links stopped after the test.

Shared by tests/tui/test_tui_config_folder.py and test_tui_other_folders.py, which each
had a copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from textual.pilot import Pilot
from textual.screen import Screen

from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.dialogs.run_list import RunsScreen
from gen_tui.app.host_links import HostLink
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.hosts import RunProcess
from gen_tui.widgets.run_table import RunTable
from tests.support.polling import wait_until

S = TypeVar("S", bound=Screen[object])


def run_of(link: HostLink, pid: int) -> RunProcess | None:
    """The run `pid` as `link`'s monitor lists it (None: not listed, or no survey yet)."""
    monitor = link.monitor
    return next((run for run in monitor.runs if run.pid == pid), None) if monitor else None


@contextmanager
def first_link(app: GenTuiApp) -> Iterator[HostLink]:
    """`app`'s first host link; its links stopped (and waited for) after the test."""
    link = app.links[0]
    try:
        yield link
    finally:
        app.stop_links()
        link.done.wait(timeout=30)


async def opened(app: GenTuiApp, pilot: Pilot[int], key: str, kind: type[S]) -> S:
    """Press `key` and wait for the screen of `kind` it opens."""
    await pilot.press(key)
    return await wait_until(
        lambda: app.screen if isinstance(app.screen, kind) else None, pause=pilot.pause
    )


@dataclass(frozen=True)
class RunList:
    """The `l` screen and what a test reads of it."""

    screen: RunsScreen
    table: RunTable

    def shown(self) -> set[str | None]:
        """The keys of the runs listed."""
        return {key.value for key in self.table.rows}

    def title(self) -> str:
        return str(self.screen.query_one("#runs-title").render())

    def cell(self, key: str, column: int = 0) -> str:
        return str(self.table.get_row(key)[column])


async def open_run_list(app: GenTuiApp, pilot: Pilot[int]) -> RunList:
    """Press `l` and wait for the run list."""
    screen = await opened(app, pilot, "l", RunsScreen)
    return RunList(screen, screen.query_one(RunTable))


async def kill_confirmation(app: GenTuiApp, pilot: Pilot[int], runs: RunList, key: str) -> str:
    """`k` on the run `key` of the list: the confirmation's text (the dialog left open)."""
    runs.table.move_cursor(row=runs.table.get_row_index(key))
    confirm = await opened(app, pilot, "k", ConfirmScreen)
    return str(confirm.query_one("#confirm-body").render())
