"""The dashboard's widgets: built once in `compose`, found once at mount, laid out by class.

Kept as typed attributes from mount on: a DOM query walks every node, and the 4 Hz refresh
would pay for that many times a second.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from textual.containers import Grid, VerticalScroll
from textual.dom import DOMNode
from textual.widget import Widget
from textual.widgets import Label, Static

from gen_tui.app.dashboard.filtering import Query
from gen_tui.app.dashboard.rules import Layout, panel_id
from gen_tui.backends.untrusted import clean
from gen_tui.widgets.dataset_panel import DatasetPanel
from gen_tui.widgets.dataset_table import DatasetTable
from gen_tui.widgets.event_log import EventLog
from gen_tui.widgets.filter_bar import FilterBar
from gen_tui.widgets.gpu_strip import GpuStrip
from gen_tui.widgets.header import RunHeader
from gen_tui.widgets.key_line import KeyLine
from gen_tui.widgets.plan_line import PlanLine
from gen_tui.widgets.server_strip import ServerStrip


def build(
    names: Sequence[str], notice: str, layout: Layout, *, table: bool = False
) -> Iterator[Widget]:
    """The widgets of a dashboard with a panel per name (call from `compose`).

    Layout classes are right from the start: every class change later restyles a whole
    subtree, which for eight panels costs a visible fraction of a second.
    """
    yield RunHeader(id="header")
    plan = PlanLine(id="plan")
    plan.display = False
    yield plan
    for strip in (ServerStrip(id="servers"), GpuStrip(id="gpus")):
        strip.display = False
        yield strip
    label = Label(clean(notice), id="notice", markup=False)
    label.display = bool(notice)
    yield label
    board = VerticalScroll(id="board", classes=layout.board_classes, can_focus=False)
    board.display = not table
    with board:
        empty = Static("", id="empty", markup=False)
        empty.display = False
        yield empty
        with Grid(id="panels", classes=layout.grid_classes):
            for name in names:
                yield DatasetPanel(name, id=panel_id(name))
    rows = DatasetTable(id="table")
    rows.display = table
    yield rows
    # Wrapped: an event's last words are often the figure that matters ("as pid 5380").
    # Focusable (tab), to scroll back with PageUp/PageDown; it follows the newest line.
    log = EventLog(id="events", max_events=500)
    log.border_title = "events"
    log.display = layout.log
    yield log
    bar = FilterBar(id="filter")
    bar.display = False
    yield bar
    yield KeyLine()


@dataclass(frozen=True)
class Parts:
    """The widgets `build` made, found once the screen is mounted."""

    header: RunHeader
    servers: ServerStrip
    gpus: GpuStrip
    notice: Label
    board: VerticalScroll
    panels: Grid
    events: EventLog
    filter: FilterBar
    empty: Static
    """Said on the board while no panel shows: each host's state in full."""
    table: DatasetTable
    """The table view: one line per dataset, shown instead of the board."""
    plan: PlanLine
    """The fleet plan under the header (hidden while no run has one)."""

    @classmethod
    def find(cls, screen: DOMNode) -> Parts:
        return cls(
            screen.query_one("#header", RunHeader),
            screen.query_one("#servers", ServerStrip),
            screen.query_one("#gpus", GpuStrip),
            screen.query_one("#notice", Label),
            screen.query_one("#board", VerticalScroll),
            screen.query_one("#panels", Grid),
            screen.query_one("#events", EventLog),
            screen.query_one("#filter", FilterBar),
            screen.query_one("#empty", Static),
            screen.query_one("#table", DatasetTable),
            screen.query_one("#plan", PlanLine),
        )

    @property
    def attached(self) -> bool:
        """Still on screen: timers and messages can arrive while a quit tears it down."""
        return self.header.is_attached and self.filter.is_attached

    def add_panels(self, names: Sequence[str]) -> list[DatasetPanel]:
        """Panels for datasets found after mount, shown if they pass the filter."""
        panels = [DatasetPanel(name, id=panel_id(name)) for name in names]
        self.panels.mount_all(panels)
        query = Query.parse(self.filter.value)
        for panel in panels:
            panel.display = query.matches(panel.dataset, None)
        return panels

    def relayout(self, old: Layout, new: Layout) -> None:
        """Move from layout `old` to `new` (classes only: styles are in tcss)."""
        if new.grid_classes != old.grid_classes:
            self.panels.remove_class(*old.grid_classes.split())
            self.panels.add_class(*new.grid_classes.split())
        if new.board_classes != old.board_classes:
            self.board.set_class(new.log, "-with-log")
        self.events.display = new.log
