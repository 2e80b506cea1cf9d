"""What the dashboard's key handlers need of it, as protocols: `controls` and `viewers` act
on the selected panel and its source and say things in toasts; `filtering` and `selection`
show, hide and focus the panels. They are tested and read without the whole screen."""

from __future__ import annotations

from typing import Any, Protocol

from textual.app import App
from textual.notifications import SeverityLevel
from textual.widget import Widget

from gen_tui.app.dashboard.sources import PanelSource
from gen_tui.widgets.dataset_panel import DatasetPanel


class Board(Protocol):
    """The selected panel, the panel sources, the app, and a toast."""

    sources: tuple[PanelSource, ...]

    @property
    def app(self) -> App[Any]: ...

    def selected(self) -> DatasetPanel | None: ...

    def target(self) -> DatasetPanel | None:
        """The selected panel for a key that acts on one; None having said why not."""
        ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...


class PanelBoard(Protocol):
    """The panels, the focus among them, and a new layout and refresh once they change."""

    @property
    def focused(self) -> Widget | None: ...

    def panels(self, visible_only: bool = False) -> list[DatasetPanel]: ...

    def relayout(self) -> None: ...

    def refresh_view(self) -> None: ...
