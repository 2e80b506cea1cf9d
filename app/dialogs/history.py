"""`h`: the history of the selected dataset (or of all) as plots: tokens over time with the
budget line, and tok/s over time, followed while open.

Why a screen of its own: at 80x24 the plots need the whole terminal. The points come from
each dataset's history.jsonl (`backends/store/history.py`) through the same bounded path as `v`
and `L`: the watcher's tail request, run on the machine that holds the file (this one, or
a GPU box over SSH), which spreads at most HISTORY_TAIL_LINES points over the whole file, so
a night fits the plot and only those points cross the link. The fetch runs in
a thread worker every HISTORY_POLL_S; the UI's loop only draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Label

from gen_tui.backends.store.history_series import DatasetHistory, summary
from gen_tui.backends.store.tails import Peek, Tail
from gen_tui.widgets.dataset_panel import DatasetPanel
from gen_tui.widgets.history_plot import HistoryPlots, legend
from gen_tui.widgets.key_line import KeyLine

HISTORY_POLL_S = 5.0
"""Seconds between two fetches while the view is open: a run writes a point every 5 s."""

Fetch = Callable[[], Tail] | None


class HistoryScreen(Screen[None]):
    """Plots of one dataset's history (← → pick another, `a` all of them); Escape goes back."""

    DEFAULT_CSS = """
    HistoryScreen #history-summary { width: 100%; }
    """
    """The summary line wraps at 80 columns rather than losing its end (the peak, the span)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,h", "close", "Panels", tooltip="Back to the dataset panels"),
        Binding("left", "step(-1)", "Prev", tooltip="The previous dataset's history"),
        Binding("right", "step(1)", "Next", tooltip="The next dataset's history"),
        Binding("a", "all", "All", tooltip="Every dataset's history on the same plots"),
        Binding("R", "reload", "Reload", show=False, tooltip="Fetch the history again now"),
    ]

    def __init__(
        self,
        dataset: str,
        names: Sequence[str],
        peek: Callable[[str], Peek | None],
        budget: Callable[[str], int | None],
    ) -> None:
        super().__init__()
        self.names = list(names) or [dataset]
        self.index = self.names.index(dataset) if dataset in self.names else 0
        self.all = False
        self.peek = peek
        self.budget = budget
        self.histories: tuple[DatasetHistory, ...] = ()
        """What the plots show now (for tests and the summary line)."""
        self._asked = 0
        """Bumped on every switch: a fetch started before one is not drawn."""

    @property
    def shown(self) -> list[str]:
        return list(self.names) if self.all else [self.names[self.index]]

    def compose(self) -> ComposeResult:
        yield Label("", id="history-title", markup=False)
        yield HistoryPlots(id="history-plots")
        yield Label("reading the history…", id="history-summary", markup=False)
        yield KeyLine()

    def on_mount(self) -> None:
        self.action_reload()
        self.set_interval(HISTORY_POLL_S, self.fetch, name="history-poll")

    def action_close(self) -> None:
        self.dismiss(None)

    def action_step(self, delta: int) -> None:
        self.all = False
        self.index = (self.index + delta) % len(self.names)
        self.action_reload()

    def action_all(self) -> None:
        self.all = not self.all
        self.action_reload()

    def action_reload(self) -> None:
        self._asked += 1
        names = self.shown
        what = "every dataset" if self.all else names[0]
        self.query_one("#history-title", Label).update(
            f"{what} · history: tokens and tok/s over time (following)"
        )
        self.query_one("#history-summary", Label).update("reading the history…")
        self.fetch()

    def fetch(self) -> None:
        """Look up where each shown history is read from (here: the sources are the UI's),
        then read them in a worker."""
        fetches = []
        for name in self.shown:
            peek = self.peek(name)
            fetches.append((name, peek.history if peek is not None else None))
        self.read(self._asked, fetches)

    @work(thread=True, exclusive=True, exit_on_error=False, group="history")
    def read(self, asked: int, fetches: list[tuple[str, Fetch]]) -> None:
        histories = tuple(_read_one(name, fetch) for name, fetch in fetches)
        self.app.call_from_thread(self._loaded, asked, histories)

    def _loaded(self, asked: int, histories: tuple[DatasetHistory, ...]) -> None:
        if asked != self._asked or not self.is_attached:
            return
        self.histories = histories
        budgets = [self.budget(h.dataset) for h in histories]
        self.query_one(HistoryPlots).draw(histories, budgets)
        shown = self.query_one("#history-summary", Label)
        if len(histories) > 1:  # a legend: which colour is which, every dataset
            shown.update(legend(histories, max(20, self.size.width - 2)))
        else:
            shown.update("\n".join(summary(h, b) for h, b in zip(histories, budgets, strict=True)))


def open_history(
    dataset: str, panels: Sequence[DatasetPanel], peek: Callable[[str], Peek | None]
) -> HistoryScreen:
    """The view for `dataset`, stepping through the datasets of `panels` (those shown), each
    with the budget its panel shows at the time of drawing (a resume may change it)."""
    by_name = {panel.dataset: panel for panel in panels}

    def budget(name: str) -> int | None:
        panel = by_name.get(name)
        snap = panel.view.snapshot if panel is not None and panel.view is not None else None
        return snap.max_tokens if snap is not None else None

    return HistoryScreen(dataset, list(by_name), peek, budget)


def _read_one(name: str, fetch: Fetch) -> DatasetHistory:
    """One dataset's history, or why not (in a worker: it blocks on a disk or a link)."""
    if fetch is None:
        return DatasetHistory(name, error="no output folder known for it here")
    try:
        tail = fetch()
    except Exception as exc:  # a link down, a timeout: said under the plots
        tail = Tail(error=str(exc) or type(exc).__name__)
    return DatasetHistory.of_tail(name, tail)
