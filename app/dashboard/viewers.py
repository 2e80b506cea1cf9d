"""The read-only screens over the dashboard: `d` quality, `v` samples, `L` log, `h` history,
`?` help.

None of them changes a run, so --readonly leaves them on. They read the selected panel's
view and its source's `Peek` (how to reach its record file and log); the screens they push
do their reading off the UI thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from textual.binding import Binding

from gen_tui.app.dashboard.board import Board
from gen_tui.app.dashboard.keys import help_rows
from gen_tui.app.dialogs.history import open_history
from gen_tui.app.dialogs.modals import HelpScreen
from gen_tui.app.dialogs.peek import LogScreen, QualityScreen, SampleScreen
from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.backends.store.tails import Peek
from gen_tui.widgets.dataset_panel import DatasetPanel

HELP_ABOUT = (
    "Badges: queued, running, paused, draining Ns, budget reached, exhausted, "
    "stale (no new record, or writing past its budget: press k), stopped, "
    "aborted, failed, not started (no run has touched it yet: r starts it)."
)


class ViewedBoard(Board, Protocol):
    """What the viewers need of the dashboard, besides the selection: the events (for `L`)
    and every panel (for `h`'s all-datasets plot)."""

    @property
    def events(self) -> Iterable[str]: ...

    def panels(self, visible_only: bool = False) -> list[DatasetPanel]: ...


class Viewers:
    """Opens each read-only screen for the board's selected dataset."""

    def __init__(self, board: ViewedBoard) -> None:
        self.board = board

    def quality(self) -> None:
        panel = self.board.target()
        if panel is not None:

            def snapshot() -> DatasetSnapshot | None:
                return panel.view.snapshot if panel.view is not None else None

            self.board.app.push_screen(QualityScreen(panel.dataset, snapshot))

    def samples(self) -> None:
        panel = self.board.target()
        if panel is None:
            return
        peek = self._peek(panel.dataset)
        if peek is None:
            self.board.notify(f"{panel.dataset}: no record file known yet", severity="warning")
            return
        self.board.app.push_screen(SampleScreen(panel.dataset, peek))

    def log(self) -> None:
        panel = self.board.target()
        if panel is not None:
            peek = self._peek(panel.dataset)
            events = self.board.events
            self.board.app.push_screen(LogScreen(panel.dataset, peek, lambda: tuple(events)))

    def history(self) -> None:
        """Plots of the selected dataset's history; ← → step through the panels shown."""
        panel = self.board.target()
        if panel is not None:
            panels = self.board.panels(visible_only=True)
            self.board.app.push_screen(open_history(panel.dataset, panels, self._peek))

    def help(self, bindings: Sequence[Binding], moves: str = "← ↑ → ↓ / tab") -> None:
        """Every key in `bindings`. Built once and kept (installed): composing and styling
        the table on every `?` was most of the key's latency."""
        app = self.board.app
        if not app.is_screen_installed("help"):
            app.install_screen(HelpScreen(help_rows(bindings, moves), HELP_ABOUT), name="help")
        app.push_screen("help")

    def _peek(self, name: str) -> Peek | None:
        return next((p for s in self.board.sources if (p := s.peek(name)) is not None), None)
