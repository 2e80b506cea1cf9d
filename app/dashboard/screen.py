"""The dashboard: one panel per dataset, a header that sums them up, and the keys on them.

The screen reads its panels from panel sources (`sources.PanelSource`) four times a second
and asks the selected panel's source what `k` and `r` mean; it never asks which kind of
source that is. Its keys are its own bindings, so they are inert whenever another screen or
a dialog is on top. The screen holds the layout and the refresh; what the keys do is in
objects it holds and hands itself to (attributes down): `Controls` (the keys that change a
run), `Viewers` (the read-only screens), `PanelFilter` (`/`) and `Selection` (which dataset
the keys act on, the arrows, and `t`'s grid or table).

The datasets show as a grid of panels or, with `t` (the default past a dozen), as a table
of one line each; the selection is one dataset in both (`Selection`, selection.py).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input

from gen_tui.app.dashboard.controls import Controls
from gen_tui.app.dashboard.filtering import PanelFilter
from gen_tui.app.dashboard.hosted import HostedRuns
from gen_tui.app.dashboard.keys import CONTROL_ACTIONS, DASHBOARD_KEYS, move_keys, remapped
from gen_tui.app.dashboard.linked import HostLinks
from gen_tui.app.dashboard.parts import Parts, build
from gen_tui.app.dashboard.rules import Layout, plan_layout
from gen_tui.app.dashboard.selection import Selection
from gen_tui.app.dashboard.sources import PanelSource
from gen_tui.app.dashboard.summary import (
    empty_text,
    gpu_view,
    header_view,
    server_loads,
    server_view,
    with_supervised,
)
from gen_tui.app.dashboard.tabling import table_layout
from gen_tui.app.dashboard.viewers import Viewers
from gen_tui.app.dialogs.servers import ServersScreen
from gen_tui.app.served import PanelServers
from gen_tui.backends.host_status import without_countdown
from gen_tui.backends.untrusted import clean, one_line
from gen_tui.widgets.dataset_panel import DatasetPanel, PanelView
from gen_tui.widgets.dataset_table import row_for
from gen_tui.widgets.event_log import EventLog
from gen_tui.widgets.filter_bar import FilterBar
from gen_tui.widgets.server_strip import TALL_SCREEN


class DashboardScreen(Screen[None]):
    """One panel per dataset; single keys act on the selected dataset's source."""

    BINDINGS: ClassVar[list[BindingType]] = list(DASHBOARD_KEYS)

    def __init__(
        self,
        hosted: HostedRuns,
        linked: HostLinks,
        *,
        names: Sequence[str],
        extra: Sequence[PanelSource] = (),
        notice: str = "",
        start_hint: str = "",
        refresh_hz: float,
        quitting: Callable[[], bool],
        app_keys: Sequence[Binding] = (),
        on_refresh: Callable[[Mapping[str, PanelView], tuple[tuple[str, str], ...]], None]
        | None = None,
        readonly: bool = False,
        keymap: Mapping[str, str] | None = None,
        servers: PanelServers | None = None,
    ) -> None:
        super().__init__()
        self.servers = servers
        """The config's `[[servers]]`, supervised (None: the config has none)."""
        self.keymap: Mapping[str, str] = dict(keymap or {})
        """The config's keys (`[keys]`, `vim`), as the app set them: help names these."""
        self.hosted = hosted
        self.linked = linked
        self.sources: tuple[PanelSource, ...] = (hosted, linked, *extra)
        """In order of precedence: the first with a view of a dataset shows it."""
        self.names = list(names)
        self.notice = clean(notice)
        self.start_hint = clean(start_hint)
        self.refresh_hz = refresh_hz
        self.quitting = quitting
        self.app_keys = tuple(app_keys)
        self.on_refresh = on_refresh
        """Told each refresh's panel views and host states (the app's alerts watch them)."""
        self.leaving = False
        """Set once the app is going away: timers and messages may still arrive."""
        self._layout = Layout(2, False, False, False)
        self._panels: list[DatasetPanel] = []
        self._by_name: dict[str, DatasetPanel] = {}
        self.parts: Parts | None = None
        """The widgets, from mount on."""
        self._host_states: dict[str, str] = {}
        self._empty_text = ""
        self.readonly = readonly
        """--readonly: k, r, s and p are off (for watching someone else's box)."""
        self.events: deque[str] = deque(maxlen=500)
        """The events pane's last lines, for `L` on a run of this process."""
        self.controls = Controls(self)
        self.viewers = Viewers(self)
        self.filtering = PanelFilter(self)
        self.selection = Selection(self)

    # layout

    def compose(self) -> ComposeResult:
        self._layout = plan_layout(self.app.size, len(self.names), 1 if self.notice else 0)
        table = self.selection.choose_view(len(self.names))
        yield from build(self.names, self.notice, self._layout, table=table)

    def on_mount(self) -> None:
        self._panels = list(self.query(DatasetPanel))
        self._by_name = {panel.dataset: panel for panel in self._panels}
        self.parts = Parts.find(self)
        if self.selection.table_shown:
            self.parts.table.focus()
        elif self._panels:
            self._panels[0].focus()
        self.set_interval(1 / self.refresh_hz, self.refresh_view, name="refresh")
        self.relayout()
        self.refresh_view()

    def on_resize(self) -> None:
        self.relayout()

    def live_parts(self) -> Parts | None:
        """The widgets; None until the dashboard is mounted and once it is going away.

        Timers and messages can still arrive while a test or a quit tears the screen down,
        before `on_unmount`: the header and the filter bar being attached is what counts.
        """
        parts = self.parts
        return parts if parts is not None and not self.leaving and parts.attached else None

    @property
    def dashboard_up(self) -> bool:
        return self.live_parts() is not None

    def panels(self, visible_only: bool = False) -> list[DatasetPanel]:
        if visible_only:
            return [p for p in self._panels if p.display]
        return list(self._panels)

    def relayout(self) -> None:
        """Pick columns and panel size for the terminal (classes only: styles are in tcss)."""
        if (parts := self.live_parts()) is None:
            return
        extra = (1 if self.notice else 0) + (1 if parts.filter.display else 0)
        extra += parts.servers.line_count + parts.gpus.line_count + parts.plan.line_count
        visible = len(self.panels(visible_only=True))
        layout = plan_layout(self.app.size, visible, extra)
        if self.selection.table_shown:
            lines = visible + parts.table.host_lines
            layout, rows = table_layout(layout, self.app.size.height, lines, extra)
            height = str(rows) if rows else "1fr"
            if str(parts.table.styles.height) != height:
                parts.table.styles.height = rows or "1fr"
        if layout != self._layout:
            old, self._layout = self._layout, layout
            parts.relayout(old, layout)

    @property
    def columns(self) -> int:
        return self._layout.columns

    def set_notice(self, text: str) -> None:
        """The line under the header; it may quote a path or a failure: shown cleaned."""
        text = clean(text)
        self.notice = text
        if (parts := self.live_parts()) is not None:
            parts.notice.update(text)
            parts.notice.display = bool(text)
            self.relayout()

    def run_started(self) -> None:
        """A run of this process started: the hint on how to start one has done its job."""
        if self.start_hint and self.notice == self.start_hint:
            self.set_notice("")

    def write_event(self, line: str) -> None:
        """A line in the events pane (visible on tall terminals), as plain text."""
        self.events.append(one_line(line))
        if (parts := self.live_parts()) is not None:
            parts.events.add(one_line(line))

    # the periodic refresh

    def view_for(self, name: str, now: float, wall: float) -> PanelView:
        for source in self.sources:
            view = source.view(name, now, wall)
            if view is not None:
                return view
        return PanelView()

    def refresh_view(self) -> None:
        if (parts := self.live_parts()) is None:
            return
        self._adopt_datasets(parts)
        now, wall = time.monotonic(), time.time()
        calibration = self.hosted.tick(now)
        if calibration is not None:
            self.set_notice(calibration.notice)
            if calibration.said:
                self.write_event(f"{time.strftime('%H:%M:%S')} info: {calibration.said}")
        with self.app.batch_update():
            views = {
                panel.dataset: self.view_for(panel.dataset, now, wall) for panel in self._panels
            }
            if self.filtering.restate(views):
                self.relayout()
            table = self.selection.table_shown
            for panel in self._panels:
                panel.show(views[panel.dataset], draw=not table)
            if table:
                visible = self.panels(visible_only=True)
                lines = parts.table.host_lines
                states = {link.name: link.state for link in self.linked.links}
                rows = [
                    row_for(p.dataset, views[p.dataset], self._group(p.dataset)) for p in visible
                ]
                parts.table.show(rows, states)
                if parts.table.host_lines != lines:
                    self.relayout()  # a host's line came or went: the table's height
            activity = next((a for s in self.sources if (a := s.activity(now))), None)
            hosts = self.linked.host_states()
            parts.header.view = header_view(
                views,
                activity,
                quitting=self.quitting(),
                idle=self.linked.idle_state(runs_here=self.hosted.source is not None),
                filter_text="" if parts.filter.events else parts.filter.value,
                hosts=hosts,
                readonly=self.readonly,
                note=self.hosted.header_note,
            )
            tall = self.app.size.height >= TALL_SCREEN
            strips = parts.servers.line_count + parts.gpus.line_count + parts.plan.line_count
            parts.plan.show(
                ((view.snapshot.host, view.snapshot.pid), view.snapshot.plan)
                for view in views.values()
                if view.snapshot is not None and not view.snapshot.state.finished
            )
            strip = server_view(activity, self.linked.servers())
            if self.servers is not None:
                strip = with_supervised(strip, self.servers.supervised)
            parts.servers.show(strip, tall=tall)
            parts.gpus.show(gpu_view(activity, self.linked.gpus()), tall=tall)
            if parts.servers.line_count + parts.gpus.line_count + parts.plan.line_count != strips:
                self.relayout()  # the board's room changed: whole panels, never a scroll
            self._show_hosts(parts, hosts)
        if self.on_refresh is not None:
            self.on_refresh(views, hosts)

    def _group(self, name: str) -> str | None:
        """The table's host group of `name`: the link watching it; "" for a dataset only
        this process runs (not a host of the fleet); None: its snapshot says."""
        link = self.linked.remote.get(name)
        if link is not None:
            return link.name
        return "" if name in self.hosted.names or name in self.hosted.owner else None

    def _show_hosts(self, parts: Parts, hosts: tuple[tuple[str, str], ...]) -> None:
        """A host's state, whenever it changes, in the events log (in full, with the time);
        and on the board while no panel shows."""
        for name, state in hosts:
            said = without_countdown(state)
            if self._host_states.get(name, "connecting") != said:
                self.write_event(f"{time.strftime('%H:%M:%S')} {name}: {state}")
                self._host_states[name] = said
        empty = not self.panels(visible_only=True)
        text = empty_text(hosts, filtered=bool(parts.filter.value.strip())) if empty else ""
        if parts.empty.display != bool(text) or (text and text != self._empty_text):
            self._empty_text = text
            parts.empty.update(text)
            parts.empty.display = bool(text)

    def _adopt_datasets(self, parts: Parts) -> None:
        """Give each dataset a source has found since (a host's, say) a panel of its own."""
        found = dict.fromkeys(name for source in self.sources for name in source.names)
        new = [name for name in found if name not in self.names]
        if not new:
            return
        self.names += new
        added = parts.add_panels(new)
        self._panels += added
        self._by_name.update((panel.dataset, panel) for panel in added)
        self.selection.datasets_added(parts)
        self.relayout()

    # the selection, in the grid or the table (selection.py)

    @property
    def table_shown(self) -> bool:
        """The table view shows (else the grid of panels)."""
        return self.selection.table_shown

    def panel_named(self, name: str) -> DatasetPanel | None:
        return self._by_name.get(name)

    def selected(self) -> DatasetPanel | None:
        return self.selection.selected()

    def target(self) -> DatasetPanel | None:
        """The selected panel for k, r, d...; with none (a filter kept that matches no
        dataset), a line saying so: the key did nothing, silently (issue 31, tried again)."""
        panel = self.selection.selected()
        if panel is None:
            why = "the filter matches none (/ to change it, Esc to clear)"
            self.notify(
                f"No dataset selected: {why if self.filter_kept() else 'none shown yet'}",
                severity="warning",
            )
        return panel

    def focus_selection(self) -> None:
        self.selection.focus_selection()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, DatasetPanel):
            self.selection.last_panel = event.widget

    def action_move(self, dx: int, dy: int) -> None:
        self.selection.move(dx, dy)

    def action_table(self) -> None:
        self.selection.toggle_view()

    def action_sort(self) -> None:
        """`o`: the table's next sort (its header says which)."""
        if (parts := self.live_parts()) is not None and self.table_shown:
            parts.table.cycle_sort()

    # keys: the selected dataset's source decides what k and r mean (controls.py); the
    # read-only screens are viewers.py's, the `/` filter filtering.py's

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """With --readonly, the keys that change a run are shown dimmed and do nothing
        (None: Textual's "shown, disabled"; False would hide them)."""
        if action == "sort" and not self.table_shown:
            return False
        if action == "clear_filter":
            return self.filter_kept()
        return None if self.readonly and action in CONTROL_ACTIONS else True

    def action_kill(self) -> None:
        self.controls.kill()

    def action_resume(self) -> None:
        self.controls.resume()

    def action_stop_one(self) -> None:
        self.controls.one("stop")

    def action_pause_one(self) -> None:
        self.controls.one("pause")

    def action_resume_all(self) -> None:
        self.controls.resume_all()

    def action_plan(self) -> None:
        self.controls.plan_target()

    def action_start(self) -> None:
        self.controls.start()

    def action_pause(self) -> None:
        self.controls.pause()

    def action_runs(self) -> None:
        self.controls.runs()

    def action_quality(self) -> None:
        self.viewers.quality()

    def action_samples(self) -> None:
        self.viewers.samples()

    def action_log(self) -> None:
        self.viewers.log()

    def action_history(self) -> None:
        self.viewers.history()

    def action_servers(self) -> None:
        """`S`: the servers view, over the config's `[[servers]]`."""
        servers = self.servers
        if servers is None:
            self.notify("no [[servers]] in the config (see docs/servers.md)", severity="warning")
            return

        def loads() -> dict[str, str]:
            parts = self.live_parts()
            return server_loads(parts.servers.view) if parts is not None else {}

        self.app.push_screen(ServersScreen(servers, loads, servers.holder, readonly=self.readonly))

    def action_help(self) -> None:
        keys = remapped((*DASHBOARD_KEYS, *self.app_keys), self.keymap)
        self.viewers.help(keys, move_keys(self.keymap))

    def action_filter(self) -> None:
        if self.live_parts() is not None:
            self.filtering.open()

    def filter_kept(self) -> bool:
        """A panel filter kept with Enter is in force (the bar shown, aimed at the panels)."""
        if self.parts is None:
            return False
        bar = self.parts.filter
        return bool(bar.display and not bar.events and bar.value)

    def action_clear_filter(self) -> None:
        """Escape on the panels: a filter kept with Enter goes, as Escape in the bar does."""
        if self.filter_kept():
            self.filter_bar.value = ""
            self.filtering.cleared()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filtering.changed(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.filtering.submitted(event.value)

    @on(FilterBar.Cleared)
    def _filter_cleared(self) -> None:
        self.filtering.cleared()

    @property
    def filter_bar(self) -> FilterBar:
        assert self.parts is not None  # filter keys and events come once it is mounted
        return self.parts.filter

    @property
    def event_log(self) -> EventLog:
        assert self.parts is not None  # likewise
        return self.parts.events
