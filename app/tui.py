"""`gen-tui`: the live control panel, hosting the engine in a Textual thread worker.

The app owns the process side: the engine runs and host links (the panel sources), their
worker threads and what those threads report. How it goes away (`q`, SIGTERM, SIGHUP) is
`gen_tui.app.departure`'s; what is shown and what the keys do is the dashboard screen's
(`gen_tui.app.dashboard.screen`).

Threads: the engine (and, for the demo, the simulator) runs in a worker thread under its
own `asyncio.run`; tokenization and file scans run in the engine's executor. The engine
thread only stores its latest :class:`RunSnapshot` in an attribute (`HostedRun.latest`) and
posts messages; a 4 Hz timer on the dashboard applies the latest snapshot inside
`batch_update()`, so the refresh rate does not depend on the request rate. Control goes the
other way as commands through `Engine.send`. `transformers` is never imported on the UI thread.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.filter import Monochrome, NoColor
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from gen_tui.app.dashboard.announce import BudgetAnnouncer
from gen_tui.app.dashboard.hosted import HostedRuns
from gen_tui.app.dashboard.keys import DASHBOARD_KEYS, remapped
from gen_tui.app.dashboard.linked import HostLinks
from gen_tui.app.dashboard.rules import StaleWatch, humanize
from gen_tui.app.dashboard.screen import DashboardScreen
from gen_tui.app.dashboard.sources import Note, PanelSource
from gen_tui.app.departure import Departure
from gen_tui.app.dialogs.notices import HidesNotices, NoticeKeeper
from gen_tui.app.engine_run import ConfigSource, HostedRun, RunSource
from gen_tui.app.heap import HeapSettler
from gen_tui.app.host_links import HostLink
from gen_tui.app.host_sources import HostSource
from gen_tui.app.messages import BudgetAnnounced, EngineEvent, HostEvent
from gen_tui.app.served import PanelServers, ServerChanged, ServerSaid
from gen_tui.app.tui_alerts import TuiAlerts
from gen_tui.backends.alerts import AlertConfig, AlertEvent
from gen_tui.backends.config.file import FileConfig
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.notify import ServerAlerts
from gen_tui.backends.settings import DEFAULT_STALE_AFTER_S, DEFAULT_THEME
from gen_tui.backends.untrusted import clean, one_line

TCSS_PATH = Path(__file__).resolve().parent.parent / "tui.tcss"
REFRESH_HZ = 4.0
HEAP_TICK_S = 1.0  # how long the loaded modules must hold still before the heap is frozen
BUDGET_TOAST_S = 6.0


class GenTuiApp(App[int]):
    """The dashboard over this process's runs and the watched hosts' runs."""

    CSS_PATH = str(TCSS_PATH)
    TITLE = "gen-tui"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: the dashboard's commands by name, and Theme
    AUTO_FOCUS = None  # panels take focus themselves; never the hidden filter bar
    NOTIFICATION_TIMEOUT = 6.0

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit (drains an active run first)", id="quit"),
        # Textual's own ctrl+c says "Press [b]ctrl+q[/b] to quit" as a toast, and toasts
        # here are plain text (notify): the tags showed. People press ctrl+c to leave, so
        # it leaves the way q does: asking first while a run is active (issue 31 point 9).
        Binding("ctrl+c", "quit", "Quit", show=False, id="quit.ctrl_c"),
        # Textual's own palette key, with an id so [keys] can move it (off the key line:
        # 80 columns hold the control keys and q; help lists it).
        Binding(
            "ctrl+p",
            "command_palette",
            "Commands",
            show=False,
            priority=True,
            tooltip="Every command by name; Theme changes the colours",
            id="palette",
        ),
    ]

    def __init__(
        self,
        source: RunSource | None = None,
        *,
        autostart: bool = True,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        names: Sequence[str] | None = None,
        refresh_hz: float = REFRESH_HZ,
        hosts: Sequence[HostSource] = (),
        sources: Sequence[PanelSource] = (),
        alerts: AlertConfig | None = None,
        readonly: bool = False,
        keymap: Mapping[str, str] | None = None,
        theme: str = DEFAULT_THEME,
        server_config: FileConfig | None = None,
    ) -> None:
        """`source`: the run this process can start; `hosts`: hosts to watch; `sources`:
        further panel sources, after those two in precedence; `names`: the panels to show
        (the source's datasets by default; the hosts' are added as they are found);
        `alerts`: the config's `[alerts]` (the terminal rings whether or not); `readonly`:
        k, r, s and p off (watching someone else's box); `keymap`: binding id -> keys, as
        `keys.build_keymap` checked them; `theme`: one of Textual's themes;
        `server_config`: a config with `[[servers]]`, which the panel then supervises
        (`served.PanelServers`)."""
        super().__init__()
        if self.no_color:
            # NO_COLOR (no-color.org): Textual only greys the colours (Monochrome) unless
            # the theme is ANSI; no colour at all is what the user asked for, whatever the
            # theme: bold, dim and reverse still mark the selection and the states.
            self._filters = [NoColor() if isinstance(f, Monochrome) else f for f in self._filters]
        self.theme = theme
        self.keymap: dict[str, str] = dict(keymap or {})
        self.set_keymap(self.keymap)
        self.alerts = TuiAlerts(self, alerts, self.record_event)
        self.readonly = readonly
        self.autostart = autostart and source is not None
        self.stale = StaleWatch(stale_after_s)
        self.announcer = BudgetAnnouncer(self._budget_toast, self.record_event)
        self.hosted = HostedRuns(source, self.stale, self._launch)
        planned = source.planned if isinstance(source, ConfigSource) else {}
        self.linked = HostLinks(hosts, self._link_said, self.stale, self.announcer, planned)
        self.extra = tuple(sources)
        self._panel_names: list[str] = list(names if names is not None else self.hosted.names)
        for name in self.linked.names:
            if name not in self._panel_names:
                self._panel_names.append(name)
        self.refresh_hz = refresh_hz
        self.notice = source.notice if source else ""
        self.start_hint = ""
        self.cleanups: list[Callable[[], None]] = []
        self.events: list[tuple[str, str]] = []
        self.notices = NoticeKeeper()
        """The last notices: those a dialog hid until they timed out are said again."""
        self.dashboard: DashboardScreen | None = None
        self.servers = (
            PanelServers(server_config, self.post_message)
            if server_config is not None and (server_config.servers or server_config.router)
            else None
        )
        """The config's servers, supervised in a worker thread (None: it has none)."""
        self._server_alerts = (
            ServerAlerts(self.alerts.alerter) if self.alerts.alerter is not None else None
        )
        self.departure = Departure(
            self, self.hosted, self.linked, self.cleanups, lambda: self.dashboard
        )

    @property
    def source(self) -> RunSource | None:
        return self.hosted.source

    @property
    def runs(self) -> list[HostedRun]:
        return self.hosted.runs

    @property
    def links(self) -> list[HostLink]:
        return self.linked.links

    def active_runs(self) -> list[HostedRun]:
        return self.hosted.active()

    def stop_links(self) -> None:
        self.linked.stop()

    def get_default_screen(self) -> DashboardScreen:
        self.dashboard = DashboardScreen(
            self.hosted,
            self.linked,
            names=self._panel_names,
            extra=self.extra,
            notice=self.notice,
            start_hint=self.start_hint,
            refresh_hz=self.refresh_hz,
            quitting=lambda: self.departure.quitting,
            app_keys=[key for key in self.BINDINGS if isinstance(key, Binding)],
            on_refresh=self.alerts.observe,
            readonly=self.readonly,
            keymap=self.keymap,
            servers=self.servers,
        )
        return self.dashboard

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """ctrl+p: the dashboard's own commands by name (each as its key would do it, so
        --readonly's keys stay off and kill still asks), then Textual's Theme.

        Textual's Quit (no drain) and Keys (its panel, not our help) are left out: q and
        ? do those the gen-tui way and are listed here."""
        dashboard = self.dashboard
        if dashboard is not None and screen is dashboard:
            bindings = [b for b in (*DASHBOARD_KEYS, *self.BINDINGS) if isinstance(b, Binding)]
            for binding in remapped(bindings, self.keymap):
                if not binding.description or binding.id in (None, "quit.ctrl_c", "palette"):
                    continue
                if binding.id.startswith("move."):
                    continue
                target = self if binding.id == "quit" else screen
                if target.check_action(binding.action, ()) is not True:
                    continue
                key = binding.key_display or self.get_key_display(binding)
                yield SystemCommand(
                    binding.description,
                    f"{binding.tooltip} ({key})",
                    functools.partial(self.call_later, target.run_action, binding.action),
                )
        for command in super().get_system_commands(screen):
            if command.title not in ("Quit", "Keys"):
                yield command

    def on_mount(self) -> None:
        self.set_interval(HEAP_TICK_S, HeapSettler().tick, name="heap")
        self.screen_change_signal.subscribe(self, self._screen_changed)
        if self.autostart:
            # After the first frame: the worker's imports (transformers) hold the GIL for
            # a while, and the window should be up before that.
            self.call_after_refresh(self.hosted.start)
        if self.links:
            # After the first frame too: the links import psutil and asyncssh.
            self.call_after_refresh(self._start_links)
        if self.servers is not None:
            self._supervise(self.servers)
        self.departure.catch_signals()

    def _refresh(self) -> None:
        if self.dashboard is not None:
            self.dashboard.refresh_view()

    def record_event(self, level: str, text: str, stamp: str | None = None) -> None:
        """Keep an event and show it in the log pane (visible on tall terminals).

        Events quote sample ids, server errors and host failures: kept and shown as one
        line with every control character made visible, so none reaches the terminal.
        """
        text = one_line(text)
        # One word for information in the log, as `gen-tui run` prints it: a toast's
        # severity ("information", Textual's) must not show as a second one.
        level = "info" if level == "information" else level
        self.events.append((level, text))
        if self.dashboard is not None:
            self.dashboard.write_event(f"{stamp or time.strftime('%H:%M:%S')} {level}: {text}")

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast, always as plain text with control characters made visible.

        Every screen's `notify` lands here, and toasts quote server errors, host failures,
        sample ids and command lines: read as markup, a `[/x]` in one would end the app
        (and an in-process run with it), and an escape sequence would reach the terminal.
        gen-tui writes no markup in its own toasts, so `markup` is ignored.
        """
        message, title = clean(message), one_line(title)
        timeout = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        self.notices.noted(message, title, severity, timeout)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def _screen_changed(self, screen: Screen[Any]) -> None:
        """A dialog opened or closed: the notices it hid until they timed out, again, for
        at most the default time (at 80x24 three of them, the kill's 15 s grace among them,
        covered the right-hand panels, B2's, for 15 s after `r`)."""
        for notice in self.notices.screen_changed(isinstance(screen, HidesNotices)):
            self.notify(
                notice.message, title=notice.title, severity=notice.severity,
                timeout=min(notice.timeout, self.NOTIFICATION_TIMEOUT),
            )  # fmt: skip

    def _budget_toast(self, text: str, title: str) -> None:
        """A budget crossed or reached: said on the line under the header (the events log
        keeps them all). A toast per dataset stacked over the panels whose badges said it."""
        dashboard = self.dashboard
        if dashboard is not None and dashboard.dashboard_up:
            dashboard.set_notice(f"{title}: {text}")
        else:
            self.notify(text, title=title, timeout=BUDGET_TOAST_S)
        self.alerts.alert(AlertEvent.BUDGET, title, text)

    # engine runs: one worker thread each

    def _launch(self, run: HostedRun) -> None:
        run.worker = self._host(run)
        if self.dashboard is not None:
            self.dashboard.run_started()

    @work(thread=True, exclusive=False, exit_on_error=False, group="engine", name="engine")
    def _host(self, run: HostedRun) -> RunSnapshot:
        return run.host(self.post_message)

    def on_engine_event(self, event: EngineEvent) -> None:
        text = humanize(event.text)
        self.record_event(event.level, text)
        if event.level == "error":
            self.notify(text, title="engine error", severity="error", timeout=12)
        elif event.level == "warning":
            self.notify(text, severity="warning", timeout=6)

    def on_budget_announced(self, message: BudgetAnnounced) -> None:
        """Crossings and finishes, as the engine reports them (data, not text)."""
        self.announcer.engine(message.event)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place where a run ends: success, engine error or a bug."""
        worker = event.worker
        run = next((r for r in self.runs if r.worker is worker), None)
        if run is None:
            if event.state is WorkerState.ERROR:
                self.notify(f"{worker.error}", severity="error")
            return
        ending = self.hosted.settle(run, event.state, worker.result, worker.error)
        if ending is None:
            return
        for level, text in ending.events:
            self.record_event(level, text)
        if ending.trace:
            self.log.error(ending.trace)
        for note in ending.notes:
            self.say(note)
        self._refresh()
        if self.departure.quitting and not self.active_runs():
            self.exit(0)

    def say(self, note: Note) -> None:
        self.notify(note.text, title=note.title, severity=note.severity, timeout=note.timeout)

    # host links: runs in other processes, here or over SSH

    @work(thread=True, exit_on_error=False, group="hosts", name="host")
    def _run_link(self, link: HostLink) -> None:
        link.run()

    def _start_links(self) -> None:
        for link in self.links:
            self._run_link(link)

    def _link_said(self, link: HostLink, severity: SeverityLevel, text: str) -> None:
        """A link's `say` (its own thread): hand it to the UI, never block."""
        self.post_message(HostEvent(link, severity, text))

    def on_host_event(self, event: HostEvent) -> None:
        link = event.link
        name, _, rest = event.text.partition(": ")
        if name in link.datasets:
            self.stale.reset(name)
        self.record_event(event.severity, f"{link.name}: {event.text}")
        outcome = link.outcome.get(name) if name in link.datasets else None
        title = f"{name}: {outcome}" if outcome else (name if rest else link.name)
        self.notify(rest or event.text, title=title, severity=event.severity, timeout=8)
        self._refresh()

    # the config's servers: supervised in a thread of their own (served.py)

    @work(thread=True, exit_on_error=False, group="servers", name="servers")
    def _supervise(self, servers: PanelServers) -> None:
        servers.run()

    def on_server_changed(self, message: ServerChanged) -> None:
        """A server's event: the events log, a toast for the bad ones, and `[alerts]` (the
        same events `gen-tui servers up` sends)."""
        event = message.event
        bad = event.state in (ServerState.EXITED, ServerState.DOWN, ServerState.FAILED)
        level = "warning" if bad else "info"
        stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
        self.record_event(level, event.line(), stamp)
        if bad:
            self.notify(one_line(event.line(), 300), severity="warning", timeout=8)
        if self._server_alerts is not None:
            self._server_alerts(event)

    def on_server_said(self, message: ServerSaid) -> None:
        self.record_event(message.severity, message.text)
        self.notify(message.text, severity=message.severity, timeout=8)

    # leaving: departure.py's

    async def action_quit(self) -> None:
        self.departure.quit()

    def exit(self, *args: Any, **kwargs: Any) -> None:
        if self.departure.hold_exit(lambda: self.exit(*args, **kwargs)):
            return
        if self.dashboard is not None:
            self.dashboard.leaving = True
        super().exit(*args, **kwargs)

    def on_unmount(self) -> None:
        if self.servers is not None:
            self.servers.leave()  # left running: the next panel adopts them
        if self.dashboard is not None:
            self.dashboard.leaving = True
        self.alerts.close()
        self.departure.unmounted()
