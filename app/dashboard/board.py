"""What the dashboard's key handlers (`controls`, `viewers`) need of it, as a protocol: they
act on the selected panel and its source and say things in toasts, and are tested and read
without the whole screen."""

from __future__ import annotations

from typing import Any, Protocol

from textual.app import App
from textual.notifications import SeverityLevel

from gen_tui.app.dashboard.sources import PanelSource
from gen_tui.widgets.dataset_panel import DatasetPanel


class Board(Protocol):
    """The selected panel, the panel sources, the app, and a toast."""

    sources: tuple[PanelSource, ...]

    @property
    def app(self) -> App[Any]: ...

    def selected(self) -> DatasetPanel | None: ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...
