"""Panels fed by host links: runs in other processes, on this machine or over SSH.

Each link runs in its own thread (`gen_tui.app.host_links`); this source only reads what the
links publish and sends them typed commands, so nothing here waits on a host.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gen_tui.app.dashboard.announce import BudgetAnnouncer
from gen_tui.app.dashboard.rules import StaleWatch, names_title
from gen_tui.app.dashboard.sources import (
    NO_PLAN,
    Action,
    Activity,
    AskBudget,
    AskTarget,
    Confirm,
    Note,
    PanelSource,
    WatchedFlight,
)
from gen_tui.app.dialogs.modals import ResumeTarget, resume_shown
from gen_tui.app.host_links import (
    HostLink,
    Kill,
    Resume,
    ResumeRun,
    Say,
    SetTarget,
    Shutdown,
    kill_question,
    kill_sent,
)
from gen_tui.app.host_sources import HostSource
from gen_tui.backends.plan.control import PlanTarget
from gen_tui.backends.progress.batches import BatchView
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.store.progress_file import ServerReport
from gen_tui.backends.store.prompt_heads import PromptHeads
from gen_tui.backends.store.tails import Peek, Tail
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.dataset_panel import PanelView, producing, shown_rates
from gen_tui.widgets.gpu_strip import GpuLine

if TYPE_CHECKING:  # asyncssh loads in the link's worker, not at startup
    from gen_tui.backends.hosts import RunProcess
    from gen_tui.backends.hosts.monitor import HostMonitor

PEEK_TIMEOUT_S = 40.0
"""The longest a look at a host's records or log waits (an SSH link that heals takes ~30 s)."""


class HostLinks(PanelSource):
    """Every watched host; a dataset belongs to the first link that found it."""

    def __init__(
        self,
        hosts: Sequence[HostSource],
        say: Say,
        stale: StaleWatch,
        announcer: BudgetAnnouncer,
        planned: Mapping[str, int | None],
    ) -> None:
        self.links = [HostLink(host, say) for host in hosts]
        self.stale = stale
        self.announcer = announcer
        self.planned = planned
        """Budgets the configured run will give its datasets (shown before it starts)."""
        self.remote: dict[str, HostLink] = {}
        self.seen: dict[str, tuple[int, int]] = {}
        """Per dataset, its tokens when first seen this session and as last seen: what the
        session saw written (the exit's summary line)."""
        self.adopt()

    @property
    def names(self) -> list[str]:
        return self.adopt()

    def adopt(self) -> list[str]:
        """Every dataset the links know, in order; new ones go to the first link with them."""
        names = []
        for link in self.links:
            for name in link.datasets:
                self.remote.setdefault(name, link)
                names.append(name)
        return names

    def stop(self) -> None:
        """Close every link (runs the app started itself, as in the demo, are stopped)."""
        for link in self.links:
            link.send(Shutdown())

    def idle_state(self, runs_here: bool) -> str:
        """The header's state with nothing running: "watching" hosts, or "idle".

        A config's own datasets are followed through a local link: that alone is not
        watching, when this process can run them itself (`runs_here`).
        """
        watching = not runs_here or any(link.source.remote for link in self.links)
        return "watching" if self.links and watching else "idle"

    def host_states(self) -> tuple[tuple[str, str], ...]:
        """(name, state) for the header: every SSH host, and a local one when it has a
        problem to say ("output folder /x does not exist"); a local link that works is
        this machine, not worth a place."""
        return tuple(
            (link.name, link.state)
            for link in self.links
            if link.source.remote or link.state != "connected"
        )

    def servers(self) -> dict[str, ServerReport]:
        """The load of the servers the watched runs use, over every host."""
        found: dict[str, ServerReport] = {}
        for link in self.links:
            monitor = link.monitor
            if monitor is not None:
                for url, report in monitor.servers().items():
                    found.setdefault(url, report)
        return found

    def gpus(self) -> tuple[GpuLine, ...]:
        """Every watched host's GPUs, with their recent utilisation."""
        lines = []
        for link in self.links:
            monitor = link.monitor
            if monitor is None:
                continue
            if monitor.telemetry.gpus_stale:
                continue  # no read for a while: a frozen figure would pass for the load now
            board = monitor.telemetry.board
            local = not link.source.remote  # this machine (asyncssh is not loaded here)
            for gpu in board.gpus:
                lines.append(GpuLine(link.name, gpu, board.history(gpu.index)[0], local))
        return tuple(lines)

    # PanelSource

    def view(self, name: str, now: float, wall: float) -> PanelView | None:
        link = self.remote.get(name)
        if link is None:
            return None
        monitor = link.monitor
        snap = monitor.snapshot(name, now) if monitor is not None else None
        busy = link.busy.get(name)
        if snap is not None and busy:
            snap = replace(snap, message=busy)
        if snap is None:
            if link.failure is not None:
                return PanelView(failure=link.failure)
            state = link.state
            return PanelView(pending="starting" if state == "connecting" else state.split(":")[0])
        self.announcer.watched(link.name, snap)
        first = self.seen.get(name, (snap.tokens, 0))[0]
        self.seen[name] = (min(first, snap.tokens), snap.tokens)
        planned = self.planned.get(name)
        if (
            snap.max_tokens is None
            and snap.state is not DatasetState.ACTIVE
            and planned is not None
        ):
            snap = replace(snap, max_tokens=planned)  # what `s` will run to
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

    def activity(self, now: float) -> Activity | None:
        """The header's "running" while a live run writes a watched dataset: a detached
        `gen-tui run` that `r` or `s` started, or another terminal's. The header said IDLE
        beside its panel's answers in flight (issue 31, point 7's residual). Its pid is the
        header's "pid ... on ...". It is not this process's run: quitting leaves it going."""
        for name, link in self.remote.items():  # the first one is enough: four times a second
            monitor = link.monitor
            if monitor is None or monitor.writer(name) is None:
                continue
            snap = monitor.snapshot(name, now)
            if snap is not None and snap.state is DatasetState.ACTIVE:
                return Activity("running", (name,), (), watched_flight=self.watched_flight())
        return None

    def watched_flight(self) -> WatchedFlight | None:
        """The watched runs' requests in flight and their limits, summed once per run (a
        run writes several datasets; each file carries its one pool), and the load of the
        servers those runs use, once per server of each host: the header's "in flight
        N/LIMIT (server: ...)" for runs of other processes. None: no live writer says it."""
        monitors = {id(link.monitor): link.monitor for link in self.links if link.monitor}
        pools = [pool for monitor in monitors.values() for pool in monitor.pools().values()]
        if not pools:
            return None
        loads: dict[tuple[int, str], ServerMetrics | None] = {}
        down: set[tuple[int, str]] = set()
        for key, monitor in monitors.items():
            said = monitor.pool_servers()
            if not said:
                continue
            reports = monitor.servers()  # one host's 127.0.0.1:30000 is not another's
            for url, state in said.items():
                report = reports.get(url)
                loads[(key, url.rstrip("/"))] = report.metrics if report is not None else None
                if state and state != "ok":  # no word (an odd field) is no alarm
                    down.add((key, url.rstrip("/")))
        return WatchedFlight(
            sum(p.inflight for p in pools),
            sum(p.concurrency for p in pools),
            tuple(loads.values()),
            servers_down=len(down),
        )

    def claims(self, name: str, action: Action) -> bool:
        return name in self.remote

    def peek(self, name: str) -> Peek | None:
        link = self.remote.get(name)
        if link is None:
            return None

        def records(count: int) -> Tail:
            return link.call(lambda host: host.tail_records(name, count), PEEK_TIMEOUT_S)

        def log(lines: int) -> Tail:
            return link.call(lambda host: host.tail_log(name, lines), PEEK_TIMEOUT_S)

        def history() -> Tail:
            return link.call(lambda host: host.tail_history(name), PEEK_TIMEOUT_S)

        def heads(keys: Sequence[str]) -> PromptHeads:
            return link.call(lambda host: host.prompt_heads(name, keys), PEEK_TIMEOUT_S)

        return Peek(records, log, history=history, heads=heads)

    def _writer(self, name: str, verb: str = "stop") -> RunProcess | Note:
        """The live process writing `name`, or the Note saying why there is none to act on
        (the link busy on it; its run ended, killed say: nothing to stop)."""
        link = self.remote[name]
        monitor = link.monitor
        writer = monitor.writer(name) if monitor is not None else None
        busy = link.busy.get(name)
        if busy:
            return Note(busy, title=name, severity="warning")
        if writer is None:
            outcome = link.outcome.get(name)
            state = f"its run has ended ({outcome})" if outcome else "no live run writes it"
            return Note(f"nothing to {verb}: {state}", title=name, severity="warning")
        return writer

    def one(self, name: str, what: str) -> Note:
        """`K`, `P` on a dataset of a run on a host: there is no channel to one of its
        datasets, only signals to its whole process; a run that has ended has no process
        left to speak of."""
        writer = self._writer(name, what)
        if isinstance(writer, Note):
            return writer
        return Note(
            f"pid {writer.pid}, a run in another process, takes no command for one dataset "
            f"({what}): k stops its whole process (R then starts all its datasets again)",
            title=name,
            severity="warning",
        )

    def kill(self, name: str, view: PanelView | None) -> Note | Confirm:
        link = self.remote[name]
        monitor = link.monitor
        writer = self._writer(name)
        if isinstance(writer, Note):
            return writer
        identity = writer.identity
        datasets = tuple(writer.datasets)

        def kill() -> Note:
            link.send(Kill(identity, datasets))
            said, wait = kill_sent(identity, link.grace_s)
            return Note(said, title=f"stopping {names_title(datasets or (name,))}", timeout=wait)

        return Confirm(
            "Kill run?",
            kill_question(
                identity, writer.datasets, name, link.grace_s, batches=_batches(monitor, writer)
            ),
            "Kill",
            kill,
        )

    def resume(self, name: str, view: PanelView) -> Note | AskBudget:
        link = self.remote[name]
        snap = view.snapshot
        monitor = _free_to_start(link, name, seen=snap is not None)
        if isinstance(monitor, Note):
            return monitor
        assert snap is not None  # seen: checked with the rest
        target = ResumeTarget(
            name=name,
            tokens=snap.tokens,
            max_tokens=snap.max_tokens,
            max_samples=snap.max_samples,
            tok_s=shown_rates(view)[0],  # a finished dataset's trailing rate is not its pace
            last_tok_s=monitor.last_rate(name),
            running=False,
            where=f"on {link.name}, as a new detached process",
            prompts_left=snap.prompts_left,
            mean_tokens=snap.mean_tokens,
            others_running=self._others_running(name, link),
            **resume_shown(monitor.host.resume_preview(name, snap.max_samples), name),
        )
        return AskBudget(
            target,
            lambda budget: link.send(Resume(name, budget, target.max_samples, mark_busy=True)),
        )

    def _others_running(self, name: str, link: HostLink) -> int:
        """The datasets producing now on `link`'s host besides `name`: which server each
        run sends to is not known here, but on one GPU box they share it, and its last
        run's rate was its share beside them (the estimate says so). Read from the monitor
        as `producing` needs it, not through `view`, which also notes budget crossings and
        the session's counts for the panels."""
        monitor = link.monitor
        if monitor is None:
            return 0
        now = time.monotonic()
        views = (
            PanelView(monitor.snapshot(other, now), countdown_s=link.countdown.get(other))
            for other, their in self.remote.items()
            if other != name and their is link
        )
        return sum(1 for view in views if producing(view))

    def plan_target(self, name: str, view: PanelView) -> Note | AskTarget:
        """`T`: a new deadline and cap for the live run writing `name`, written as its plan
        control file into its dataset folders (the link's thread writes it; over SSH every
        value quoted); the run re-plans at its next look, within a second or two."""
        link = self.remote[name]
        monitor = link.monitor
        writer = monitor.writer(name) if monitor is not None else None
        snap = view.snapshot
        if writer is None:
            return Note("no live run writes it", title=name, severity="warning")
        if snap is None or snap.plan is None:
            return Note(NO_PLAN, title=name, severity="warning")
        where = f"pid {writer.pid} on {one_line(link.name, 80)} (its plan control file)"

        def then(target: PlanTarget) -> Note:
            link.send(SetTarget(writer, target))
            return Note(f"plan target sent: {target.said()}", title=name)

        return AskTarget(snap.plan, where, then)

    def resume_all(self, name: str) -> Note | Confirm:
        """What `R` on `name` does: start every dataset of the run that last wrote it (and
        has ended, killed say) again in one new run, its command as launched, budgets
        included (issue 31, request 4)."""
        link = self.remote[name]
        monitor = _free_to_start(link, name)
        if isinstance(monitor, Note):
            return monitor
        run = next(
            (
                ended
                for ended in monitor.ended
                if name in ended.datasets and ended.mine and ended.output_dir == monitor.output_dir
            ),
            None,
        )
        if run is None:
            return Note(
                f"{name}: no ended run of yours seen writing it this session; r resumes it alone",
                severity="warning",
            )
        datasets = ", ".join(run.datasets)
        body = (
            f"Start pid {run.pid}'s datasets again on {one_line(link.name, 80)}, as one new "
            f"detached run, as launched (their own budgets):\n"
            f"Datasets: {one_line(datasets, 500)}\n"
            f"Command: {one_line(shlex.join(run.identity.cmdline), 500)}"
        )
        one = len(run.datasets) == 1  # "Resume all 1?" read oddly
        title = f"Resume {one_line(run.datasets[0], 40)}?" if one else None
        return Confirm(
            title or f"Resume all {len(run.datasets)}?",
            body,
            "Resume" if one else "Resume all",
            lambda: link.send(ResumeRun(run, None)),
        )


def _free_to_start(link: HostLink, name: str, *, seen: bool = True) -> HostMonitor | Note:
    """The link's monitor if `name` may start again there (`r`, `R`); else the Note that
    says why not: not `seen` yet, the link busy on it, or a run still writing it (the host
    would refuse a second writer; saying so here names the pid and the way out)."""
    monitor = link.monitor
    busy = link.busy.get(name)
    if not seen or monitor is None or busy:
        return Note(f"{name}: {busy or 'not seen yet'}", severity="warning")
    writer = monitor.writer(name)
    if writer is not None:
        return Note(
            f"pid {writer.pid} still writes it: press k first (a second writer is refused)",
            title=name,
            severity="warning",
        )
    return monitor


def _batches(monitor: HostMonitor | None, writer: RunProcess) -> list[BatchView]:
    """The batches in flight of `writer`'s datasets, as its progress.json says them (what
    its kill cancels)."""
    if monitor is None:
        return []
    snaps = (monitor.snapshot(name) for name in writer.datasets)
    return [batch for snap in snaps if snap is not None for batch in snap.batches]
