"""`gen-tui`: the live control panel, hosting the engine in a Textual thread worker.

Threads: the engine (and, for the demo, the simulator) runs in a worker thread under its
own `asyncio.run`; tokenization and file scans run in the engine's executor. The engine
thread only stores its latest :class:`RunSnapshot` in an attribute (`Run.latest`) and posts
events; a 4 Hz timer on the UI applies the latest snapshot inside `batch_update()`, so the
refresh rate does not depend on the request rate. Control goes the other way through
`Engine.threadsafe`. `transformers` is never imported on the UI thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Label, RichLog
from textual.worker import Worker, WorkerState

from gen_tui.app.board import (
    Layout,
    StaleWatch,
    crossing_text,
    describe,
    humanize,
    panel_id,
    plan_layout,
)
from gen_tui.app.engine_run import BudgetAnnounced, ConfigSource, EngineEvent, Run, RunSource
from gen_tui.app.headless import summary_line
from gen_tui.app.heap import HeapSettler
from gen_tui.app.hosts import (
    SHUTDOWN_GRACE_S,
    HostLink,
    HostSource,
)
from gen_tui.app.screens import ConfirmScreen, HelpRow, HelpScreen, ResumeScreen, ResumeTarget
from gen_tui.backends.counts import format_count
from gen_tui.backends.run_config import EngineError
from gen_tui.backends.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.widgets.dataset_panel import DatasetPanel, PanelView
from gen_tui.widgets.filter_bar import FilterBar
from gen_tui.widgets.header import HeaderView, RunHeader
from gen_tui.widgets.key_line import KeyLine

if TYPE_CHECKING:  # the engine (aiohttp), asyncssh and psutil load in workers, not at startup
    from gen_tui.backends.hosts import RunIdentity

TCSS_PATH = Path(__file__).resolve().parent.parent / "tui.tcss"
REFRESH_HZ = 4.0
HEAP_TICK_S = 1.0  # how long the loaded modules must hold still before the heap is frozen
DEFAULT_STALE_AFTER_S = 60.0
BUDGET_TOAST_S = 6.0


class HostEvent(Message):
    """Something a host link wants said (a kill outcome, a resume, a refusal, a failure)."""

    def __init__(self, link: HostLink, severity: str, text: str) -> None:
        super().__init__()
        self.link = link
        self.severity = severity
        self.text = text


# ---- the app ------------------------------------------------------------------------------


class GenTuiApp(App[int]):
    """One panel per dataset; single keys act on the selected dataset's run."""

    CSS_PATH = str(TCSS_PATH)
    TITLE = "gen-tui"
    ENABLE_COMMAND_PALETTE = False
    AUTO_FOCUS = None  # panels take focus themselves; never the hidden filter bar
    NOTIFICATION_TIMEOUT = 6.0

    BINDINGS: ClassVar[list[Binding]] = [
        Binding(
            "k",
            "kill",
            "Kill",
            tooltip="Stop the selected dataset's run: drain in-flight requests, then abort",
            id="kill",
        ),
        Binding(
            "r",
            "resume",
            "Resume",
            tooltip="Give the selected dataset a new token budget and run it to that",
            id="resume",
        ),
        Binding("s", "start", "Start", tooltip="Start the configured run", id="start"),
        Binding(
            "l",
            "runs",
            "Runs",
            tooltip="Every generation process on the watched hosts; k and r act on them",
            id="runs",
        ),
        Binding(
            "p",
            "pause",
            "Pause",
            tooltip="Hold or release dispatch; in-flight requests carry on",
            id="pause",
        ),
        Binding(
            "slash",
            "filter",
            "Filter",
            key_display="/",
            tooltip="Show only datasets whose name contains some text",
            id="filter",
        ),
        Binding(
            "question_mark",
            "help",
            "Help",
            key_display="?",
            tooltip="Every key and what it does",
            id="help",
        ),
        Binding("q", "quit", "Quit", tooltip="Quit (drains an active run first)", id="quit"),
        Binding("left", "move(-1, 0)", "Left", show=False, id="move.left"),
        Binding("right", "move(1, 0)", "Right", show=False, id="move.right"),
        # Priority: otherwise the scrolling board (9+ panels at 80x24) takes up/down itself.
        Binding("up", "move(0, -1)", "Up", show=False, id="move.up", priority=True),
        Binding("down", "move(0, 1)", "Down", show=False, id="move.down", priority=True),
    ]
    DASHBOARD_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"kill", "resume", "start", "pause", "filter", "help", "move", "runs"}
    )

    def __init__(
        self,
        source: RunSource | None = None,
        *,
        autostart: bool = True,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        names: Sequence[str] | None = None,
        refresh_hz: float = REFRESH_HZ,
        hosts: Sequence[HostSource] = (),
    ) -> None:
        super().__init__()
        self.source = source
        self.autostart = autostart and source is not None
        if names is None:
            names = source.names if source else ()
        self.names: list[str] = list(names)
        self.links = [HostLink(source, self._link_said) for source in hosts]
        self.remote: dict[str, HostLink] = {}
        for link in self.links:
            for name in link.datasets:
                self.remote.setdefault(name, link)
                if name not in self.names:
                    self.names.append(name)
        self.refresh_hz = refresh_hz
        self.stale = StaleWatch(stale_after_s)
        self.runs: list[Run] = []
        self.owner: dict[str, Run] = {}
        self.static: dict[str, PanelView] = {}
        self.static_run: RunSnapshot | None = None
        self.notice = source.notice if source else ""
        self.start_hint = ""
        self.quitting = False
        self.cleanups: list[Callable[[], None]] = []
        self._layout = Layout(2, False, False, False)
        self._panels: list[DatasetPanel] = []
        self._panels_mounted = False
        self._parts: dict[str, Widget] = {}
        self._leaving = False
        self.events: list[tuple[str, str]] = []
        self._crossed: dict[str, int | None] = {}
        self._link_seen: dict[str, int] = {}

    # layout

    def compose(self) -> ComposeResult:
        # Layout classes are right from the start: every class change later restyles a
        # whole subtree, which for eight panels costs a visible fraction of a second.
        layout = self._layout = plan_layout(
            self.size, len(self.names), extra_rows=1 if self.notice else 0
        )
        yield RunHeader(id="header")
        notice = Label(self.notice, id="notice", markup=False)
        notice.display = bool(self.notice)
        yield notice
        board = VerticalScroll(id="board", classes=layout.board_classes, can_focus=False)
        with board, Grid(id="panels", classes=layout.grid_classes):
            for name in self.names:
                yield DatasetPanel(name, id=panel_id(name))
        log = RichLog(id="events", markup=False, wrap=False, max_lines=500)
        log.can_focus = False
        log.border_title = "events"
        log.display = layout.log
        yield log
        bar = FilterBar(id="filter")
        bar.display = False
        yield bar
        yield KeyLine()

    def on_mount(self) -> None:
        self._panels = list(self.query(DatasetPanel))
        self._parts = {
            f"#{part}": self.query_one(f"#{part}")
            for part in ("header", "notice", "board", "panels", "events", "filter")
        }
        self._panels_mounted = True
        panels = self.panels()
        if panels:
            panels[0].focus()
        self.set_interval(1 / self.refresh_hz, self.refresh_view, name="refresh")
        self.set_interval(HEAP_TICK_S, HeapSettler().tick, name="heap")
        if self.autostart:
            # After the first frame: the worker's imports (transformers) hold the GIL for
            # a while, and the window should be up before that.
            self.call_after_refresh(self.start_run)
        if self.links:
            # After the first frame too: the links import psutil and asyncssh.
            self.call_after_refresh(self._start_links)
        self.relayout()
        self.refresh_view()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, self._on_sigterm)
            loop.add_signal_handler(signal.SIGHUP, self._on_sighup)

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

    def on_resize(self) -> None:
        self.relayout()

    def panels(self, visible_only: bool = False) -> list[DatasetPanel]:
        panels = list(self._panels)
        if visible_only:
            panels = [p for p in panels if p.display]
        return panels

    def ui(self, selector: str, expect_type: type[Any] = Widget) -> Any:
        """A widget of the dashboard, whatever dialog is on top of it.

        The app's own parts are kept from mount on (`_part`): a DOM query walks every node,
        and the 4 Hz refresh would pay for that many times a second."""
        part = self._parts.get(selector)
        if part is not None:
            return part
        return self.screen_stack[0].query_one(selector, expect_type)

    @property
    def dashboard_up(self) -> bool:
        """False until the dashboard is mounted and once it is going away.

        Timers and messages can still arrive while a test or a quit tears the screen down,
        before `on_unmount`: the header and the filter bar being present is what counts.
        """
        return (
            bool(self.screen_stack)
            and self._panels_mounted
            and not self._leaving
            and all(self._parts[part].is_attached for part in ("#header", "#filter"))
        )

    def relayout(self) -> None:
        """Pick columns and panel size for the terminal (classes only: styles are in tcss)."""
        if not self.dashboard_up:
            return
        extra = (1 if self.notice else 0) + (1 if self.ui("#filter").display else 0)
        layout = plan_layout(self.size, len(self.panels(visible_only=True)), extra)
        if layout == self._layout:
            return
        old, self._layout = self._layout, layout
        if layout.grid_classes != old.grid_classes:
            grid = self.ui("#panels")
            grid.remove_class(*old.grid_classes.split())
            grid.add_class(*layout.grid_classes.split())
        if layout.board_classes != old.board_classes:
            self.ui("#board").set_class(layout.log, "-with-log")
        self.ui("#events").display = layout.log

    @property
    def columns(self) -> int:
        return self._layout.columns

    # runs

    def start_run(
        self, only: str | None = None, budget: tuple[int | None, int | None] | None = None
    ) -> Run | None:
        if self.source is None:
            self.notify("Nothing to start: no run is configured.", severity="warning")
            return None
        run = Run(len(self.runs) + 1, self.source, only, budget)
        self.runs.append(run)
        for name in run.names:
            self.owner[name] = run
            self.stale.reset(name)
            self.static.pop(name, None)
        run.worker = self._host(run)
        if self.start_hint and self.notice == self.start_hint:
            self.set_notice("")
        return run

    @work(thread=True, exclusive=False, exit_on_error=False, group="engine", name="engine")
    def _host(self, run: Run) -> RunSnapshot:
        """The worker: the engine (and whatever its source starts) under its own asyncio.run."""
        try:
            return asyncio.run(self._engine_main(run))
        finally:
            run.done.set()

    async def _engine_main(self, run: Run) -> RunSnapshot:
        from gen_tui.backends.engine import Engine  # aiohttp: off the UI's startup path

        async with AsyncExitStack() as stack:
            config = run.shape(await run.source.prepare(stack))
            engine = Engine(
                config,
                on_snapshot=run.store,
                on_event=functools.partial(self._engine_event, run),
                on_budget=lambda event: self.post_message(BudgetAnnounced(run, event)),
            )
            task = asyncio.create_task(engine.run())
            await asyncio.sleep(0)  # run() has bound its loop: threadsafe() works from here
            run.attach(engine)
            return await task

    def _engine_event(self, run: Run, level: str, text: str) -> None:
        """The engine's `on_event` (engine thread): hand it to the UI, never block."""
        self.post_message(EngineEvent(run, level, text))

    def record_event(self, level: str, text: str, stamp: str | None = None) -> None:
        """Keep an event and show it in the log pane (visible on tall terminals)."""
        self.events.append((level, text))
        if not self.dashboard_up:
            return
        stamp = stamp or time.strftime("%H:%M:%S")
        self.ui("#events", RichLog).write(f"{stamp} {level}: {text}")

    def on_engine_event(self, event: EngineEvent) -> None:
        text = humanize(event.text)
        self.record_event(event.level, text)
        if event.level == "error":
            self.notify(text, title="engine error", severity="error", timeout=12)
        elif event.level == "warning":
            self.notify(text, severity="warning", timeout=6)

    def on_budget_announced(self, message: BudgetAnnounced) -> None:
        """Crossings and finishes, as the engine reports them (data, not text)."""
        event = message.event
        name = event.dataset
        if event.kind == "crossed":
            self._crossed[name] = event.tokens
            self.notify(
                crossing_text(event.max_tokens, event.tokens), title=name, timeout=BUDGET_TOAST_S
            )
        elif self._crossed.pop(name, None) != event.tokens:
            # The final count, once the in-flight requests are in; not repeated when it is
            # the count the crossing already announced.
            what = "all prompts done" if event.kind == "exhausted" else "budget reached"
            self.notify(
                f"{what}: {event.tokens:,} tokens, {event.samples:,} samples",
                title=name,
                timeout=BUDGET_TOAST_S,
            )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place where a run ends: success, engine error or a bug."""
        run = next((r for r in self.runs if r.worker is event.worker), None)
        if run is None:
            if event.state is WorkerState.ERROR:
                self.notify(f"{event.worker.error}", severity="error")
            return
        if event.state is WorkerState.SUCCESS:
            final = event.worker.result
            if final is not None:
                run.latest = final
                self.record_event("info", summary_line(final))
            engine = run.engine
            if run.stop_at is not None:
                run.outcome = "aborted" if engine is not None and engine.aborted else "stopped"
                self.notify(
                    "in-flight requests aborted; their samples run again on resume"
                    if run.outcome == "aborted"
                    else "in-flight requests drained; everything completed is on disk",
                    title=f"{describe(run.names)}: run {run.outcome}",
                    severity="warning" if run.outcome == "aborted" else "information",
                )
            else:
                run.outcome = None
        elif event.state is WorkerState.ERROR:
            error = event.worker.error
            if isinstance(error, EngineError):
                run.failure = str(error)
            else:
                run.failure = f"{type(error).__name__}: {error}"
                self.log.error(
                    "".join(traceback.format_exception(error)) if error else "worker error"
                )
            self.notify(run.failure, title="run failed", severity="error", timeout=15)
            self.record_event("error", run.failure)
        elif event.state is WorkerState.CANCELLED:
            run.failure = run.failure or "cancelled"
        else:
            return
        run.done.set()
        self.refresh_view()
        if self.quitting and not self.active_runs():
            self.exit(0)

    # hosts: runs in other processes, here or over SSH

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
        self.refresh_view()

    def stop_links(self) -> None:
        """Close every host link (runs the app started itself, as in the demo, are stopped)."""
        for link in self.links:
            link.send("shutdown")

    def link_for(self, name: str) -> HostLink | None:
        return self.remote.get(name)

    def _adopt_datasets(self) -> None:
        """Give each dataset a link has found a panel (first come, first served by name)."""
        new = []
        for link in self.links:
            for name in link.datasets:
                if name not in self.remote:
                    self.remote[name] = link
                if name not in self.names:
                    self.names.append(name)
                    new.append(name)
        if new and self.dashboard_up:
            panels = [DatasetPanel(name, id=panel_id(name)) for name in new]
            self.ui("#panels").mount_all(panels)
            self._panels += panels
            needle = self.ui("#filter", FilterBar).value.strip().lower()
            for panel in panels:
                panel.display = needle in panel.dataset.lower()
            if not isinstance(self.focused, DatasetPanel) and not isinstance(
                self.screen, ModalScreen
            ):
                self.call_after_refresh(self._focus_first)
            self.relayout()

    def _focus_first(self) -> None:
        visible = self.panels(visible_only=True)
        if visible and not isinstance(self.focused, DatasetPanel):
            visible[0].focus()

    def link_view(self, link: HostLink, name: str, now: float, wall: float) -> PanelView:
        monitor = link.monitor
        snap = monitor.snapshot(name, now) if monitor is not None else None
        if snap is not None and link.busy.get(name):
            snap = replace(snap, message=link.busy[name])
        if snap is None:
            if link.failure is not None:
                return PanelView(failure=link.failure)
            state = link.state
            return PanelView(pending="starting" if state == "connecting" else state.split(":")[0])
        self._announce_crossing(link, snap)
        if (
            snap.max_tokens is None
            and snap.state is not DatasetState.ACTIVE
            and isinstance(self.source, ConfigSource)
            and self.source.planned.get(name) is not None
        ):
            snap = replace(snap, max_tokens=self.source.planned[name])  # what `s` will run to
        countdown = link.countdown.get(name)
        live = snap.state is DatasetState.ACTIVE and countdown is None
        reason = self.stale.check(snap, wall) if live else ""
        outcome = link.outcome.get(name) if snap.state is DatasetState.STOPPED else None
        return PanelView(
            snap,
            stale=bool(reason),
            stale_reason=reason,
            countdown_s=countdown,
            outcome=outcome,
        )

    def _announce_crossing(self, link: HostLink, snap: DatasetSnapshot) -> None:
        """A watched dataset crossing its budget is an event, as an in-process one is.

        Seen from its records: announced once per budget, the first time its count is at
        or past it, and not for a dataset that was already past it when first seen.
        """
        name, budget = snap.name, snap.max_tokens
        if budget is None:
            return
        before = self._link_seen.get(name)
        self._link_seen[name] = snap.tokens
        if before is not None and before < budget <= snap.tokens:
            text = crossing_text(budget, snap.tokens)
            self.record_event("budget", f"{name} on {link.name}: {text}")
            self.notify(text, title=name, timeout=BUDGET_TOAST_S)

    def _kill_remote(self, link: HostLink, name: str) -> None:
        monitor = link.monitor
        writer = monitor.writer(name) if monitor is not None else None
        if link.busy.get(name):
            self.notify(link.busy[name], title=name, severity="warning")
            return
        if writer is None:
            state = link.outcome.get(name) or "no live run writes it"
            self.notify(f"nothing to stop: {state}", title=name, severity="warning")
            return
        identity = writer.identity
        self.push_screen(
            ConfirmScreen(
                "Kill run?",
                f"Stop pid {identity.pid} on {identity.host}?\n"
                f"Datasets: {', '.join(writer.datasets) or name}\n"
                f"Command: {identity.command[:200]}\n"
                f"SIGTERM to its process group: it drains in-flight requests for up to "
                f"{link.grace_s:g} s, then SIGKILL. Completed responses are kept.",
                "Kill",
            ),
            lambda ok: self._send_kill(link, identity, writer.datasets) if ok else None,
        )

    def _send_kill(self, link: HostLink, identity: RunIdentity, names: Sequence[str]) -> None:
        link.busy = {**link.busy, **dict.fromkeys(names, "SIGTERM sent")}
        link.send("kill", identity)
        self.refresh_view()

    def _resume_remote(self, link: HostLink, name: str, view: PanelView) -> None:
        snap = view.snapshot
        monitor = link.monitor
        if snap is None or monitor is None or link.busy.get(name):
            self.notify(f"{name}: {link.busy.get(name) or 'not seen yet'}", severity="warning")
            return
        writer = monitor.writer(name)
        target = ResumeTarget(
            name=name,
            tokens=snap.tokens,
            max_tokens=snap.max_tokens,
            max_samples=snap.max_samples,
            tok_s=snap.tok_s,
            running=False,
            where=f"on {link.name}, as a new detached process",
        )
        if writer is not None:
            self.notify(
                f"pid {writer.pid} still writes it: press k first (a second writer is refused)",
                title=name,
                severity="warning",
            )
            return

        def decided(budget: int | None) -> None:
            if budget is not None:
                link.busy = {**link.busy, name: f"starting again to {format_count(budget)}"}
                link.send("resume", (name, budget, target.max_samples))
                self.refresh_view()

        self.push_screen(ResumeScreen(target), decided)

    def active_runs(self) -> list[Run]:
        return [run for run in self.runs if run.active]

    # the periodic refresh

    def view_for(self, name: str, now: float, wall: float) -> PanelView:
        run = self.owner.get(name)
        link = self.remote.get(name)
        if run is None and link is not None:
            return self.link_view(link, name, now, wall)
        if run is None:
            return self.static.get(name, PanelView())
        if run.failure is not None:
            return PanelView(run.dataset(name), failure=run.failure)
        snap = run.dataset(name)
        if snap is None:
            return PanelView(pending="starting" if run.active else "idle")
        reason = self.stale.check(snap, wall) if run.active else ""
        return PanelView(
            snap,
            stale=bool(reason),
            stale_reason=reason,
            countdown_s=run.countdown(now),
            outcome=run.outcome,
        )

    def refresh_view(self) -> None:
        if not self.dashboard_up:
            return
        if self.links:
            self._adopt_datasets()
        now, wall = time.monotonic(), time.time()
        for run in self.active_runs():
            remaining = run.countdown(now)
            if remaining is not None and remaining <= 0 and not run.escalated:
                run.abort()
            self._calibrate(run, now)
        with self.batch_update():
            views = {}
            for panel in self.panels():
                view = self.view_for(panel.dataset, now, wall)
                views[panel.dataset] = view
                panel.show(view)
            self.ui("#header", RunHeader).view = self.header_view(views, now)

    def _calibrate(self, run: Run, now: float) -> None:
        if run.only is not None or run.latest is None or run.stop_at is not None:
            return
        if run.was_paused:  # a pause says nothing about the machine's speed
            return
        result = run.source.calibrate(run.latest, now - run.started)
        if result is None:
            return
        for name, tokens in result.budgets.items():
            snap = run.dataset(name)
            run.control("set_budget", name, tokens, snap.max_samples if snap else None)
        self.set_notice(result.notice)

    def set_notice(self, text: str) -> None:
        self.notice = text
        if not self.dashboard_up:
            return
        notice = self.ui("#notice", Label)
        notice.update(text)
        notice.display = bool(text)
        self.relayout()

    def header_view(self, views: dict[str, PanelView], now: float) -> HeaderView:
        snaps = [v.snapshot for v in views.values() if v.snapshot is not None]
        active = self.active_runs()
        latest = [run.latest for run in active if run.latest is not None]
        countdowns = [c for run in active if (c := run.countdown(now)) is not None]
        static = self.static_run
        if not active and static is not None:
            latest = [static]
            state = "stopping" if static.stopping else "paused" if static.paused else "running"
        elif not active:
            watching = self.source is None or any(link.source.remote for link in self.links)
            state = "watching" if self.links and watching else "idle"
        elif self.quitting:
            state = "quitting"
        elif any(run.escalated for run in active):
            state = "aborting"
        elif countdowns:
            state = "stopping"
        elif not latest:
            state = "starting"
        elif any(run.paused for run in active):
            state = "paused"
        else:
            state = "running"
        where = ""
        names = active[0].names if active else [s.name for s in static.datasets] if static else []
        first = next((s for s in snaps if s.name in names), None)
        if first is not None:
            where = f"pid {first.pid} on {first.host}"
        return HeaderView(
            state=state,
            tokens=sum(s.tokens for s in snaps),
            tok_s=sum(s.tok_s for s in snaps if not s.state.finished),
            done=sum(1 for s in snaps if s.state in (DatasetState.DONE, DatasetState.EXHAUSTED)),
            total=len(views),
            inflight=sum(s.inflight for s in latest),
            concurrency=sum(s.concurrency for s in latest),
            utilisation=(sum(s.utilisation for s in latest) / len(latest)) if latest else None,
            countdown_s=min(countdowns) if countdowns else None,
            where=where,
            filter=self.ui("#filter", FilterBar).value,
            servers=sum(len(s.servers) for s in latest),
            servers_down=sum(1 for s in latest for status in s.servers.values() if status != "ok"),
            hosts=tuple((link.name, link.state) for link in self.links if link.source.remote),
            cost=sum(costs) if (costs := [s.cost for s in snaps if s.cost is not None]) else None,
            cost_per_hour=sum(
                s.cost_per_hour for s in snaps if s.cost_per_hour and not s.state.finished
            )
            or None,
        )

    # feeding panels without an engine (tests, snapshots)

    def show_snapshot(self, snapshot: RunSnapshot, now: float | None = None) -> None:
        """Show a snapshot as if a run had sent it, with stale judged at wall time `now`."""
        wall = time.time() if now is None else now
        self.static_run = snapshot
        for snap in snapshot.datasets:
            if snap.name not in self.names:
                continue
            reason = self.stale.check(snap, wall)
            self.static[snap.name] = PanelView(snap, stale=bool(reason), stale_reason=reason)
        self.refresh_view()

    # selection

    def selected(self) -> DatasetPanel | None:
        focused = self.focused
        if isinstance(focused, DatasetPanel):
            return focused
        visible = self.panels(visible_only=True)
        return visible[0] if visible else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Dashboard keys do nothing on any other screen (the run list's arrows move its
        # cursor); q neither while a dialog is open: its own keys apply.
        on_top = bool(self.screen_stack) and self.screen is not self.screen_stack[0]
        if action in self.DASHBOARD_ACTIONS and on_top:
            return False
        return not (action == "quit" and isinstance(self.screen, ModalScreen))

    def action_move(self, dx: int, dy: int) -> None:
        visible = self.panels(visible_only=True)
        if not visible:
            return
        current = self.selected()
        index = visible.index(current) if current in visible else 0
        if not isinstance(self.focused, DatasetPanel):
            visible[index].focus()
            return
        target = index + dx + dy * self.columns
        if 0 <= target < len(visible):
            visible[target].focus()

    # keys

    def action_kill(self) -> None:
        panel = self.selected()
        if panel is None:
            return
        run = self.owner.get(panel.dataset)
        link = self.remote.get(panel.dataset)
        if link is not None and (run is None or not run.active):
            self._kill_remote(link, panel.dataset)
            return
        if run is None or not run.active:
            view = panel.view
            writer = view.snapshot if view is not None and run is None else None
            if writer is not None and not writer.state.finished:
                # Written by another process (seen through its progress.json): stopping it
                # from here is the job of the process-control layer, not hooked up yet.
                message = (
                    f"written by pid {writer.pid} on {writer.host}, not by this process; "
                    "stop it there (SIGTERM drains it)"
                )
            else:
                message = "no run in this process writes it"
            self.notify(message, title=panel.dataset, severity="warning")
            return
        snap = run.dataset(panel.dataset)
        who = f"pid {snap.pid} on {snap.host}" if snap else "this process (starting)"
        datasets = ", ".join(run.names)
        if run.stopping:
            self.push_screen(
                ConfirmScreen(
                    "Abort now?",
                    f"The run ({who}) is draining. Abort its in-flight requests now?\n"
                    f"Datasets: {datasets}\nCompleted responses are kept; aborted samples "
                    "stay undone and run again on the next resume.",
                    "Abort",
                ),
                lambda ok: self._abort(run) if ok else None,
            )
            return
        self.push_screen(
            ConfirmScreen(
                "Kill run?",
                f"Stop the run of {who}?\nDatasets: {datasets}\n"
                f"No new requests; in-flight ones drain for up to {run.grace_s:g} s, then "
                "are aborted. Completed responses are kept.",
                "Kill",
            ),
            lambda ok: self._kill(run) if ok else None,
        )

    def _kill(self, run: Run) -> None:
        if not run.active:
            return
        run.request_stop()
        self.notify(
            f"draining in-flight requests for up to {run.grace_s:g} s (k again aborts)",
            title=f"stopping {describe(run.names)}",
        )
        self.refresh_view()

    def _abort(self, run: Run) -> None:
        if run.active:
            run.abort()
            self.refresh_view()

    def action_resume(self) -> None:
        panel = self.selected()
        if panel is None:
            return
        name = panel.dataset
        run = self.owner.get(name)
        link = self.remote.get(name)
        if link is not None and (run is None or not run.active) and name not in self._own_names():
            self._resume_remote(link, name, panel.view or PanelView())
            return
        view = panel.view or PanelView()
        snap = view.snapshot
        spec = self._spec(name)
        if snap is None and spec is None:
            self.notify(f"{name}: nothing known about it yet", severity="warning")
            return
        running = run is not None and run.active
        if running and run is not None and run.stopping:
            self.notify(f"{name}: its run is stopping; resume it once it has ended")
            return
        target = ResumeTarget(
            name=name,
            tokens=snap.tokens if snap else 0,
            max_tokens=snap.max_tokens if snap else (spec.max_tokens if spec else None),
            max_samples=snap.max_samples if snap else (spec.max_samples if spec else None),
            tok_s=snap.tok_s if snap else 0.0,
            running=running and snap is not None and not snap.state.finished,
            where=self._backend(run),
        )
        self.push_screen(ResumeScreen(target), lambda budget: self._resume(target, budget))

    def _backend(self, run: Run | None) -> str:
        """Which server the in-process engine sends a dataset to, for the resume modal."""
        engine = run.engine if run is not None else None
        config = engine.config if engine is not None else None
        if config is None and isinstance(self.source, ConfigSource):
            config = self.source.config
        if config is None:
            return "in this process"
        api = "OpenAI-compatible API" if config.api == "openai" else "SGLang"
        urls = ", ".join(config.server_urls[:2]) + (" ..." if len(config.server_urls) > 2 else "")
        model = f", model {config.model}" if config.model else ""
        return f"in this process: {api} at {urls}{model}"

    def _own_names(self) -> tuple[str, ...]:
        """Datasets this process can run itself (its configured source)."""
        return self.source.names if self.source is not None else ()

    def _spec(self, name: str):
        if isinstance(self.source, ConfigSource):
            return next((s for s in self.source.config.datasets if s.name == name), None)
        return None

    def _resume(self, target: ResumeTarget, budget: int | None) -> None:
        if budget is None:
            return
        name = target.name
        run = self.owner.get(name)
        if (
            run is not None
            and run.active
            and not run.stopping
            and run.control("set_budget", name, budget, target.max_samples)
        ):
            self.notify(f"budget set to {format_count(budget)}", title=name)
            return
        if self.source is None or name not in self.source.names:
            self.notify(f"{name}: not part of a run this panel can start", severity="warning")
            return
        self.start_run(only=name, budget=(budget, target.max_samples))
        self.notify(f"resuming to {format_count(budget)} in a new in-process run", title=name)
        self.refresh_view()

    def action_start(self) -> None:
        if self.active_runs():
            self.notify("A run is already active in this process (k stops it).")
            return
        if self.start_run() is not None:
            self.notify("starting the configured run")
            self.refresh_view()

    def action_runs(self) -> None:
        if not self.links:
            self.notify(
                "No host is watched: start gen-tui with --host TARGET --remote-dir DIR, or "
                "add [[hosts]] to the config.",
                severity="warning",
            )
            return
        from gen_tui.app.run_screen import RunsScreen

        self.push_screen(RunsScreen(self.links))

    def action_pause(self) -> None:
        active = [run for run in self.active_runs() if not run.stopping]
        if not active:
            self.notify("Nothing to pause: no run is active in this process.")
            return
        paused = not any(run.paused for run in active)
        for run in active:
            run.paused = paused
            run.was_paused = run.was_paused or paused
            run.control("set_paused", paused)
        self.notify("dispatch paused (in-flight requests finish)" if paused else "dispatch resumed")
        self.refresh_view()

    def action_filter(self) -> None:
        bar = self.ui("#filter", FilterBar)
        bar.display = True
        bar.focus()
        self.relayout()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.apply_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        bar = self.ui("#filter", FilterBar)
        if not event.value:
            bar.display = False
        visible = self.panels(visible_only=True)
        if visible:
            visible[0].focus()
        self.relayout()

    @on(FilterBar.Cleared)
    def _filter_cleared(self) -> None:
        bar = self.ui("#filter", FilterBar)
        bar.display = False
        self.apply_filter("")
        visible = self.panels(visible_only=True)
        if visible:
            visible[0].focus()
        self.relayout()

    def apply_filter(self, text: str) -> None:
        needle = text.strip().lower()
        for panel in self.panels():
            panel.display = needle in panel.dataset.lower()
        self.relayout()
        self.refresh_view()

    def help_rows(self) -> list[HelpRow]:
        rows = []
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            if not binding.show:
                continue
            key = binding.key_display or binding.key
            rows.append(HelpRow(key, binding.description, binding.tooltip))
        rows.append(HelpRow("← ↑ → ↓ / tab", "Select", "Move between dataset panels"))
        rows.append(HelpRow("ctrl+q", "Quit", "Same as q"))
        return rows

    def action_help(self) -> None:
        # Built once and kept (installed): composing and styling the table on every `?`
        # was most of the key's latency.
        if not self.is_screen_installed("help"):
            about = (
                "Badges: queued, running, paused, draining Ns, budget reached, exhausted, "
                "stale (no new record, or writing past its budget: press k), stopped, "
                "aborted, failed."
            )
            self.install_screen(HelpScreen(self.help_rows(), about), name="help")
        self.push_screen("help")

    async def action_quit(self) -> None:
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
            self.refresh_view()

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
        self._leaving = True
        super().exit(*args, **kwargs)

    def on_unmount(self) -> None:
        self._leaving = True
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signum)
        # Last resort (an exit not through `q`): abort so the worker threads end and
        # asyncio.run, which waits for executor threads, can return.
        for run in self.active_runs():
            run.abort()
        self.stop_links()


if __name__ == "__main__":  # `python -m gen_tui.app.tui --demo`, same as `gen-tui --demo`
    import os

    from gen_tui.app.cli import build_parser
    from gen_tui.app.launch import main

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main(build_parser().parse_args()))
