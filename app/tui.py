"""`gen-tui`: the live control panel, hosting the engine in a Textual thread worker.

The app owns the process side: the engine runs and host links (the panel sources), their
worker threads, what those threads report, signals and quitting. What is shown and what the
keys do is the dashboard screen's (`gen_tui.app.dashboard.screen`).

Threads: the engine (and, for the demo, the simulator) runs in a worker thread under its
own `asyncio.run`; tokenization and file scans run in the engine's executor. The engine
thread only stores its latest :class:`RunSnapshot` in an attribute (`HostedRun.latest`) and
posts messages; a 4 Hz timer on the dashboard applies the latest snapshot inside
`batch_update()`, so the refresh rate does not depend on the request rate. Control goes the
other way through `Engine.threadsafe`. `transformers` is never imported on the UI thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.worker import Worker, WorkerState

from gen_tui.app.board import StaleWatch, humanize
from gen_tui.app.dashboard.announce import BudgetAnnouncer
from gen_tui.app.dashboard.hosted import HostedRuns
from gen_tui.app.dashboard.linked import HostLinks
from gen_tui.app.dashboard.screen import DashboardScreen
from gen_tui.app.dashboard.sources import Note, PanelSource
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.engine_run import (
    BudgetAnnounced,
    ConfigSource,
    EngineEvent,
    HostedRun,
    RunSource,
)
from gen_tui.app.heap import HeapSettler
from gen_tui.app.hosts import SHUTDOWN_GRACE_S, HostLink, HostSource, leaving_answers
from gen_tui.app.tui_alerts import TuiAlerts
from gen_tui.backends.alerts import AlertConfig, AlertEvent
from gen_tui.backends.settings import DEFAULT_STALE_AFTER_S
from gen_tui.backends.snapshot import RunSnapshot
from gen_tui.backends.untrusted import clean, one_line

TCSS_PATH = Path(__file__).resolve().parent.parent / "tui.tcss"
REFRESH_HZ = 4.0
HEAP_TICK_S = 1.0  # how long the loaded modules must hold still before the heap is frozen
BUDGET_TOAST_S = 6.0
LEAVE_MARGIN_S = 10.0
"""On its way out, the app waits for the runs it started up to their grace and this much."""


class HostEvent(Message):
    """Something a host link wants said (a kill outcome, a resume, a refusal, a failure)."""

    def __init__(self, link: HostLink, severity: str, text: str) -> None:
        super().__init__()
        self.link = link
        self.severity = severity
        self.text = text


class GenTuiApp(App[int]):
    """The dashboard over this process's runs and the watched hosts' runs."""

    CSS_PATH = str(TCSS_PATH)
    TITLE = "gen-tui"
    ENABLE_COMMAND_PALETTE = False
    AUTO_FOCUS = None  # panels take focus themselves; never the hidden filter bar
    NOTIFICATION_TIMEOUT = 6.0

    BINDINGS: ClassVar[list[Binding]] = [
        Binding("q", "quit", "Quit", tooltip="Quit (drains an active run first)", id="quit"),
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
    ) -> None:
        """`source`: the run this process can start; `hosts`: hosts to watch; `sources`:
        further panel sources, after those two in precedence; `names`: the panels to show
        (the source's datasets by default; the hosts' are added as they are found);
        `alerts`: the config's `[alerts]` (the terminal rings whether or not); `readonly`:
        k, r, s and p off (watching someone else's box)."""
        super().__init__()
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
        self.quitting = False
        self.cleanups: list[Callable[[], None]] = []
        self.events: list[tuple[str, str]] = []
        self.dashboard: DashboardScreen | None = None
        self._leaving_since: float | None = None
        """When the app began waiting for the runs it started to stop, on its way out."""
        self._outer_handlers: dict[int, Any] = {}
        """The signal handlers in place before the app's own (put back at unmount)."""

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
            quitting=lambda: self.quitting,
            app_keys=self.BINDINGS,
            on_refresh=self.alerts.observe,
            readonly=self.readonly,
        )
        return self.dashboard

    def on_mount(self) -> None:
        self.set_interval(HEAP_TICK_S, HeapSettler().tick, name="heap")
        if self.autostart:
            # After the first frame: the worker's imports (transformers) hold the GIL for
            # a while, and the window should be up before that.
            self.call_after_refresh(self.hosted.start)
        if self.links:
            # After the first frame too: the links import psutil and asyncssh.
            self.call_after_refresh(self._start_links)
        loop = asyncio.get_running_loop()
        for signum, handler in (
            (signal.SIGTERM, self._on_sigterm),
            (signal.SIGHUP, self._on_sighup),
        ):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self._outer_handlers[signum] = signal.getsignal(signum)
                loop.add_signal_handler(signum, handler)

    def _refresh(self) -> None:
        if self.dashboard is not None:
            self.dashboard.refresh_view()

    def record_event(self, level: str, text: str, stamp: str | None = None) -> None:
        """Keep an event and show it in the log pane (visible on tall terminals).

        Events quote sample ids, server errors and host failures: kept and shown as one
        line with every control character made visible, so none reaches the terminal.
        """
        text = one_line(text)
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
        super().notify(
            clean(message), title=one_line(title), severity=severity, timeout=timeout, markup=False
        )

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
        if self.quitting and not self.active_runs():
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

    def _link_said(self, link: HostLink, severity: str, text: str) -> None:
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
        self.notify(rest or event.text, title=title, severity=event.severity, timeout=8)  # type: ignore[arg-type]
        self._refresh()

    # leaving

    def _on_sigterm(self) -> None:
        """Stop runs at once and leave the normal way, so `main` still cleans up."""
        for run in self.active_runs():
            run.abort()
        self.quitting = True
        if not self.active_runs():
            self.exit(0)

    def _on_sighup(self) -> None:
        """The terminal went away (tmux pane or session killed).

        Nothing can be drawn any more, and Textual's own shutdown would block writing to
        the dead terminal, so: abort the runs, wait for their threads to close their
        files, run the cleanups (the demo folder) and leave.
        """
        for run in self.active_runs():
            run.abort()
        self.stop_links()

        def finish() -> None:
            for run in self.runs:
                run.done.wait(timeout=run.grace_s + 5)
            for link in self.links:
                link.done.wait(timeout=SHUTDOWN_GRACE_S + 15)
            for cleanup in self.cleanups:
                with contextlib.suppress(Exception):
                    cleanup()
            os._exit(128 + signal.SIGHUP)

        threading.Thread(target=finish, name="gen-tui-hangup", daemon=True).start()

    async def action_quit(self) -> None:
        if isinstance(self.screen, ModalScreen):  # ctrl+q too: a dialog's own keys apply
            return
        active = self.active_runs()
        if not active:
            self.exit(0)
            return
        if self.quitting:
            for run in active:
                run.abort()
            return
        datasets = ", ".join(name for run in active for name in run.names)
        grace = max(run.grace_s for run in active)

        def decided(ok: bool | None) -> None:
            if not ok:
                return
            self.quitting = True
            for run in self.active_runs():
                run.request_stop()
            self.notify(f"draining before exit (up to {grace:g} s); q again aborts", title="quit")
            self._refresh()

        self.push_screen(
            ConfirmScreen(
                "Quit gen-tui?",
                f"A run is active in this process: {datasets}.\n"
                f"Quitting stops it first: no new requests, in-flight ones drain for up to "
                f"{grace:g} s. Completed responses are kept; start again to resume.",
                "Stop and quit",
            ),
            decided,
        )

    def exit(self, *args: Any, **kwargs: Any) -> None:
        if self._stop_started_first(args, kwargs):
            return
        if self.dashboard is not None:
            self.dashboard.leaving = True
        super().exit(*args, **kwargs)

    def _stop_started_first(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Runs this session started on a host (the demo's) drain before the app goes, with
        the screen saying so: the seconds they take used to pass on a blank terminal.
        True: exiting once they have ended (or once their kill's wait is over, whatever
        they do; `q` again leaves at once)."""
        links = [link for link in self.links if link.started and not link.done.is_set()]
        if self._leaving_since is not None or not links or self.dashboard is None:
            return False
        self._leaving_since = time.monotonic()
        self.quitting = True
        answers = leaving_answers(links)
        self.dashboard.set_notice(
            f"quitting: stopping the runs this session started, draining {answers:,} "
            f"answer{'s' * (answers != 1)}… (q again leaves now)"
        )
        self.stop_links()
        from gen_tui.backends.hosts.kill import kill_wait  # asyncssh: not at startup

        limit = LEAVE_MARGIN_S + max(
            kill_wait(identity.cmdline, link.grace_s) for link in links for identity in link.started
        )

        def check() -> None:
            waited = time.monotonic() - (self._leaving_since or 0.0)
            if all(link.done.is_set() for link in links) or waited > limit:
                self.exit(*args, **kwargs)

        self.set_interval(0.2, check, name="leaving")
        return True

    def on_unmount(self) -> None:
        if self.dashboard is not None:
            self.dashboard.leaving = True
        self.alerts.close()
        # asyncio's remove_signal_handler leaves the default action (die at once); put back
        # what was there before, so the launcher's handlers (the demo's folder) still run
        # for a signal that comes while the app's threads are being waited for.
        loop = asyncio.get_running_loop()
        for signum, outer in self._outer_handlers.items():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError, TypeError):
                loop.remove_signal_handler(signum)
                signal.signal(signum, outer)
        # Last resort (an exit not through `q`): abort so the worker threads end and
        # asyncio.run, which waits for executor threads, can return.
        for run in self.active_runs():
            run.abort()
        self.stop_links()


if __name__ == "__main__":  # `python -m gen_tui.app.tui --demo`, same as `gen-tui --demo`
    from gen_tui.app.cli import build_parser
    from gen_tui.app.launch import main

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main(build_parser().parse_args()))
