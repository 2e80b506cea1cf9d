"""A panel source that shows fixed snapshots: how the dashboard tests feed it without an engine.

It is a real `PanelSource` handed to `GenTuiApp(sources=[...])`: the dashboard reads it like
any other, after this process's runs and the host links.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from gen_tui.app.dashboard.rules import StaleWatch
from gen_tui.app.dashboard.sources import Activity, PanelSource
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.widgets.dataset_panel import PanelView


class StaticSnapshot(PanelSource):
    """The last `RunSnapshot` shown, with stale judged at the wall time it was shown at."""

    def __init__(self, names: Sequence[str], stale_after_s: float) -> None:
        self._names = tuple(names)
        self.stale = StaleWatch(stale_after_s)
        self.run: RunSnapshot | None = None
        self.views: dict[str, PanelView] = {}

    def show(self, snapshot: RunSnapshot, now: float | None = None) -> None:
        """Take `snapshot` as if a run had sent it, with stale judged at wall time `now`."""
        wall = time.time() if now is None else now
        self.run = snapshot
        for snap in snapshot.datasets:
            if snap.name not in self._names:
                continue
            reason = self.stale.check(snap, wall)
            self.views[snap.name] = PanelView(snap, stale=bool(reason), stale_reason=reason)

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def view(self, name: str, now: float, wall: float) -> PanelView | None:
        return self.views.get(name)

    def activity(self, now: float) -> Activity | None:
        run = self.run
        if run is None:
            return None
        state = "stopping" if run.stopping else "paused" if run.paused else "running"
        return Activity(state, [s.name for s in run.datasets], [run])
