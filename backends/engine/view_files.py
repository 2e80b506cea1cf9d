"""What a run writes beside its records for people to look at: progress.json and history.jsonl.

Both are views, not data: the records are what must not be lost, and a failed record write
stops the run by itself (the sink's `disk_failure`). So a view that cannot be written is said
once per dataset and never stops the run; progress.json is tried again at every tick (a
folder made writable again gets it back), the history is given up (a gap is no harm, and a
failing disk should not be hit every few seconds for a plot).
"""

from __future__ import annotations

from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.store.history import HistoryPoint, HistoryWriter
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.store.records import PROGRESS_FILE


class RunViews(RunPart):
    """Each dataset's progress.json and history.jsonl, written at every progress tick."""

    def __init__(self, run: RunContext) -> None:
        super().__init__(run)
        self._history = {ds.name: HistoryWriter(ds.folder) for ds in self.datasets}
        self._history_failed: set[str] = set()

    def open(self, ds: DatasetRun) -> None:
        """Open `ds`'s history once its folder is locked (runs in a worker thread)."""
        try:
            self._history[ds.name].open()
        except OSError as exc:  # the timeline is a view: the run goes on without it
            self._history_trouble(ds, exc)

    def write(self, snapshot: RunSnapshot) -> None:
        """Replace each progress.json and add a history point where one is due."""
        for ds, snap in zip(self.datasets, snapshot.datasets, strict=True):
            if ds.lock.held:
                try:
                    ProgressFile.write(ds.folder / PROGRESS_FILE, snapshot, snap)
                except OSError as exc:
                    if not ds.progress_failed:
                        self.reporter.event(
                            "warning",
                            f"{ds.name}: cannot write {ds.folder / PROGRESS_FILE}: "
                            f"{exc.strerror or exc}",
                        )
                    ds.progress_failed = True
                else:
                    ds.progress_failed = False
                self._append_history(ds, HistoryPoint.of(snap))

    def _append_history(self, ds: DatasetRun, point: HistoryPoint) -> None:
        history = self._history[ds.name]
        if ds.name in self._history_failed or not history.due(point):
            return
        try:
            history.append(point)
        except OSError as exc:
            self._history_trouble(ds, exc)

    def _history_trouble(self, ds: DatasetRun, exc: OSError) -> None:
        """Say once that the timeline cannot be kept, and stop trying."""
        if ds.name not in self._history_failed:
            self._history_failed.add(ds.name)
            self.reporter.event(
                "warning",
                f"{ds.name}: cannot keep its history in {self._history[ds.name].path}: "
                f"{exc.strerror or exc}; the run goes on without it",
            )
