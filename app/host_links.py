"""Hosts in the app: a :class:`HostMonitor` per host, each in its own worker thread and loop.

The UI thread reads a link's monitor (its attributes are replaced whole, never mutated) and
its per-dataset `busy`/`countdown`/`outcome` dicts (likewise), and sends typed commands
(:class:`Kill`, :class:`Resume`, :class:`Start`, :class:`ResumeRun`, :class:`Shutdown`) through
:meth:`HostLink.send`; a kill or a start never waits on the UI loop, and a slow or dropped
SSH link never blocks a key. Only the link writes its state: `send` marks a command's
datasets busy itself, under the same lock as the link's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeVar

from gen_tui.app.host_sources import HostSource
from gen_tui.backends.figures import format_count
from gen_tui.backends.plan.control import ControlError, PlanTarget
from gen_tui.backends.progress.batches import BatchView, cancel_note
from gen_tui.backends.untrusted import one_line

if TYPE_CHECKING:  # psutil and asyncssh load in the worker, not at startup
    from textual.notifications import SeverityLevel

    from gen_tui.backends.hosts import Host, KillOutcome, RunIdentity, RunProcess
    from gen_tui.backends.hosts.monitor import HostMonitor

SHUTDOWN_GRACE_S = 5.0
"""How long a process the app itself started gets to drain when the app exits."""

T = TypeVar("T")

Say = Callable[["HostLink", "SeverityLevel", str], None]
"""(link, severity, text): something the user should read, called from the link's thread."""


def leaving_answers(links: Sequence[HostLink]) -> int:
    """Answers in flight in the datasets of `links`, as last seen (what quitting drains)."""
    now, answers = time.monotonic(), 0
    for link in links:
        monitor = link.monitor
        for name in link.datasets if monitor is not None else ():
            snap = monitor.snapshot(name, now) if monitor is not None else None
            answers += snap.inflight if snap is not None else 0
    return answers


def leaving_drain_s(links: Sequence[HostLink]) -> float:
    """How long the runs the `links` started may take to drain as the app leaves: the
    longest kill wait among them (each run's own drain, when longer than the link's grace)."""
    from gen_tui.backends.hosts.kill import kill_wait  # asyncssh: not at startup

    return max(
        kill_wait(identity.cmdline, link.grace_s) for link in links for identity in link.started
    )


# ---- what the UI asks of a link ----------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    """Stop the process `identity` (SIGTERM, drain, SIGKILL).

    `datasets` show as busy from the moment the command is sent (the dashboard's panels);
    empty from the run list, which shows the countdown once the link has it.
    """

    identity: RunIdentity
    datasets: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        return "SIGTERM sent"


@dataclass(frozen=True)
class Resume:
    """Start `dataset` again as a new detached process with a new budget."""

    dataset: str
    tokens: int | None
    samples: int | None
    mark_busy: bool = False
    """Show the dataset as starting from the moment the command is sent (its panel)."""

    @property
    def datasets(self) -> tuple[str, ...]:
        return (self.dataset,) if self.mark_busy else ()

    @property
    def note(self) -> str:
        return f"starting again to {format_count(self.tokens or 0)}"


@dataclass(frozen=True)
class Start:
    """`s`: start `names` as one new detached run from the host's run command (the same
    guarded start as :class:`Resume`), to `tokens` or, None, to the command's own budgets."""

    names: tuple[str, ...]
    tokens: int | None
    samples: int | None

    @property
    def datasets(self) -> tuple[str, ...]:
        return self.names

    @property
    def note(self) -> str:
        return "starting as a detached run"


@dataclass(frozen=True)
class ResumeRun:
    """Start an ended run's command again, as launched, with a new token budget."""

    run: RunProcess
    tokens: int | None
    datasets: ClassVar[tuple[str, ...]] = ()
    note: ClassVar[str] = ""


@dataclass(frozen=True)
class Shutdown:
    """Close the link (stopping the runs it started itself, if its source owns them)."""

    datasets: ClassVar[tuple[str, ...]] = ()
    note: ClassVar[str] = ""


@dataclass(frozen=True)
class SetTarget:
    """Give the live run `run` a new deadline and cap: its plan control file (see
    backends/plan/control.py), which its planner reads within a second or two."""

    run: RunProcess
    target: PlanTarget
    datasets: ClassVar[tuple[str, ...]] = ()
    note: ClassVar[str] = ""


Command = Kill | Resume | Start | ResumeRun | SetTarget | Shutdown


def kill_question(
    identity: RunIdentity,
    datasets: Sequence[str],
    none: str,
    grace_s: float,
    *,
    folder: str | None = None,
    batches: Sequence[BatchView] = (),
) -> str:
    """The kill confirmation's text for a process on a host (`none`: when it names none).

    The command line is the process's own, whoever started it: one line, its control
    characters made visible, so what the dialog shows is what the kill would stop. `folder`:
    the output folder of a run writing one that is not watched here, named so that nobody
    stops another project's run for their own (issue 31, point 2). `batches`: its batches
    in flight (`--api openai-batch`), which the stop cancels, and what the provider bills.
    """
    from gen_tui.backends.hosts.kill import drain_said

    elsewhere = (
        f"Writes {one_line(folder, 500)}: another folder, not the one watched here\n"
        if folder is not None
        else ""
    )
    return (
        f"Stop pid {identity.pid} on {one_line(identity.host, 200)}?\n"
        f"Datasets: {one_line(', '.join(datasets) or none, 500)}\n"
        f"{elsewhere}"
        f"Command: {one_line(identity.command, 500)}\n"
        f"SIGTERM to its process group: {drain_said(identity.cmdline, grace_s)}. "
        "Completed responses are kept." + (f"\n{cancel_note(batches)}" if batches else "")
    )


def kill_sent(identity: RunIdentity, grace_s: float) -> tuple[str, float]:
    """What `y` on the kill question says at once, and for how long (the whole wait up to
    SIGKILL): the grace the question named. The panel's own line for it ("SIGTERM sent;
    SIGKILL in 15 s") has no room in a compact panel at 80x24, nor beside the host and pid
    in a 40-column one, so it was seen nowhere (issue 31, tried again)."""
    from gen_tui.backends.hosts.kill import drain_said, kill_wait

    said = f"SIGTERM sent to pid {identity.pid}: {drain_said(identity.cmdline, grace_s)}"
    return said, kill_wait(identity.cmdline, grace_s)


class HostLink:
    """One host as the UI sees it (see the module docstring)."""

    def __init__(self, source: HostSource, say: Say | None = None) -> None:
        self.source = source
        self.say = say
        self.grace_s = source.grace_s
        self.label = source.label
        self.monitor: HostMonitor | None = None
        self.busy: dict[str, str] = {}
        self.countdown: dict[str, int] = {}
        self.outcome: dict[str, str] = {}
        self.started: tuple[RunIdentity, ...] = ()
        self.failure: str | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Command] | None = None
        self._pending: list[Command] = []

    # any thread

    @property
    def name(self) -> str:
        monitor = self.monitor
        return monitor.name if monitor is not None else self.label or "host"

    @property
    def datasets(self) -> tuple[str, ...]:
        monitor = self.monitor
        return monitor.datasets if monitor is not None else self.source.datasets

    @property
    def stops_started_runs(self) -> bool:
        """This link started runs it stops as the app leaves (its source owns them: the
        demo's), and has not ended yet: what a quit asks about and the exit waits for. A
        detached start (`s` or `r` from a config, `r` on a host) outlives the panel: nothing
        to ask about or wait for, and the exit line says it still runs."""
        return (
            bool(self.started)
            and self.source.owns_runs
            and not self.done.is_set()
            and not self.started_ended
        )

    @property
    def started_ended(self) -> bool:
        """Every run this link started has been seen to end (the demo's B9 after `k`, listed
        as ended in `l`): nothing left to stop. A quit used to ask about it all the same
        ("its 0 answers in flight drain for up to 35 s"). A run started but not yet seen by
        a survey has not ended."""
        monitor = self.monitor
        if monitor is None:
            return False
        return all(
            any(run.identity.same_process(started) for run in monitor.ended)
            and not any(run.identity.same_process(started) for run in monitor.runs)
            for started in self.started
        )

    @property
    def state(self) -> str:
        if self.failure is not None:
            return f"failed: {self.failure}"
        monitor = self.monitor
        return monitor.status if monitor is not None else "connecting"

    def send(self, command: Command) -> None:
        """Queue a command for the link's thread; its datasets show its note until then."""
        with self._lock:
            if command.datasets:
                self._mark_locked(command.datasets, busy=command.note, count=None, keep=True)
            if self._loop is None or self._queue is None:
                self._pending.append(command)
                return
            loop, queue = self._loop, self._queue
        with contextlib.suppress(RuntimeError):  # the worker's loop has already closed
            loop.call_soon_threadsafe(queue.put_nowait, command)

    def hurry(self) -> None:
        """Leaving now (`q` again while quitting): SIGKILL the runs this link started, at
        once, from any thread. Their drain's wait (the run's own grace, ~30 s for the demo's
        stale run) then ends, and with it the link: the app no longer sits on a blank
        terminal waiting for the link's thread (issue 31 point 3)."""
        with self._lock:
            loop, monitor = self._loop, self.monitor
        started = self.started
        if loop is None or monitor is None or not started:
            return
        host = monitor.host

        async def kill_now() -> None:
            for identity in started:
                with contextlib.suppress(Exception):
                    await host.kill_now(identity)

        with contextlib.suppress(RuntimeError):  # the worker's loop has already closed
            asyncio.run_coroutine_threadsafe(kill_now(), loop)

    def call(self, work: Callable[[Host], Coroutine[object, object, T]], timeout: float) -> T:
        """Run `work(host)` on the link's loop and wait for its result: blocks, so only from
        a thread worker (the sample viewer, the log tail). Raises ConnectionError when the
        link is not up, TimeoutError, or what `work` raises."""
        with self._lock:
            loop, monitor = self._loop, self.monitor
        if loop is None or monitor is None:
            raise ConnectionError(f"{self.name}: {self.state}")
        future = asyncio.run_coroutine_threadsafe(work(monitor.host), loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    # the worker thread

    def run(self) -> None:
        """The worker's body: its own loop until "shutdown"; failures end up in `failure`."""
        try:
            asyncio.run(self._main())
        except Exception as exc:  # a bug or a failed launch: said on the panel, never raised
            self.failure = f"{type(exc).__name__}: {exc}"
            self._say("error", self.failure)
        finally:
            self.done.set()

    async def _main(self) -> None:
        from gen_tui.backends.hosts import RunError
        from gen_tui.backends.hosts.monitor import HostMonitor

        queue: asyncio.Queue[Command] = asyncio.Queue()
        with self._lock:
            self._loop, self._queue = asyncio.get_running_loop(), queue
            pending, self._pending = self._pending, []
        for item in pending:
            queue.put_nowait(item)
        async with AsyncExitStack() as stack:
            host = await self.source.open(stack)
            stack.push_async_callback(host.close)
            source = self.source
            monitor = HostMonitor(
                host, source.datasets, discover=source.discover, servers=source.servers
            )
            self.monitor = monitor
            task = asyncio.create_task(monitor.run())
            stack.push_async_callback(_cancel, task)
            if self.source.owns_runs:  # first of all on the way out, while the monitor runs
                stack.push_async_callback(self._stop_own_runs)
            seeded = getattr(self.source, "launched", None)
            if seeded is not None:
                self.started = (seeded,)
            while True:
                command = await queue.get()
                try:
                    match command:
                        case Shutdown():
                            return
                        case Kill(identity=identity):
                            await self._kill(monitor, identity)
                        case Resume(dataset=dataset, tokens=tokens, samples=samples):
                            await self._resume(monitor, dataset, tokens, samples)
                        case Start(names=names, tokens=tokens, samples=samples):
                            await self._start(
                                names,
                                tokens,
                                monitor.start(names, tokens, samples),
                                ", ".join(names),
                                "started",
                            )
                        case ResumeRun(run=run, tokens=tokens):
                            await self._resume_run(monitor, run, tokens)
                        case SetTarget(run=run, target=target):
                            path = await monitor.host.write_plan_target(run, target)
                            self._say(
                                "information",
                                f"plan target for pid {run.pid}: {target.said()} ({path})",
                            )
                except (RunError, ControlError) as exc:
                    self._say("warning", str(exc))
                except Exception as exc:  # never let one command end the link
                    self._say("error", f"{type(exc).__name__}: {exc}")

    async def _kill(
        self, monitor: HostMonitor, identity: RunIdentity, quiet: bool = False
    ) -> KillOutcome:
        names = monitor.datasets_of(identity) or tuple(
            name for name, run in ((n, monitor.writer(n)) for n in monitor.datasets)
            if run is not None and run.identity.same_process(identity)
        )  # fmt: skip
        from gen_tui.backends.hosts import kill_wait

        grace = kill_wait(identity.cmdline, self.grace_s)  # the run's own drain, when longer
        self._mark(names, busy=f"SIGTERM sent; SIGKILL in {grace:g} s", count=math.ceil(grace))

        def tick(left: int) -> None:
            with self._lock:
                self.countdown = {**self.countdown, **dict.fromkeys(names, left)}

        try:
            outcome = await monitor.kill(identity, grace, on_tick=tick)
        finally:
            self._mark(names, busy=None, count=None)
        self.outcome = {**self.outcome, **dict.fromkeys(names, str(outcome.result))}
        if not quiet:
            from gen_tui.backends.hosts import KillResult

            refused = outcome.result in (KillResult.NOT_YOURS, KillResult.REFUSED)
            severity: SeverityLevel = (
                "warning" if refused or outcome.files_stable is False else "information"
            )
            self._say(severity, f"{', '.join(names) or 'run'}: {outcome.detail}")
        return outcome

    async def _resume(
        self, monitor: HostMonitor, dataset: str, tokens: int | None, samples: int | None
    ) -> None:
        await self._start(
            (dataset,), tokens, monitor.resume(dataset, tokens, samples), dataset, "resumed"
        )

    async def _resume_run(self, monitor: HostMonitor, run: RunProcess, tokens: int | None) -> None:
        what = ", ".join(run.datasets) or f"run {run.pid}"
        await self._start(
            run.datasets, tokens, monitor.resume_run(run, tokens), what, "started again"
        )

    async def _start(
        self,
        names: Sequence[str],
        tokens: int | None,
        starting: Awaitable[RunIdentity],
        what: str,
        verb: str,
    ) -> None:
        """Show `names` as starting while `starting` runs; then record and say the new run."""
        starting_to = f"starting again to {format_count(tokens)}" if tokens else "starting"
        self._mark(names, busy=starting_to, count=None)
        try:
            identity = await starting
        finally:
            self._mark(names, busy=None, count=None)
        self.started = (*self.started, identity)
        self.outcome = {k: v for k, v in self.outcome.items() if k not in names}
        # None: the command's own budgets (`s`, `R`), whatever its flags or config say.
        budget = f"to {format_count(tokens)}" if tokens else "with its own budgets"
        self._say("information", f"{what}: {verb} {budget} as pid {identity.pid}")

    async def _stop_own_runs(self) -> None:
        """Stop what the app started (identity-checked: one that already ended is left)."""
        monitor = self.monitor
        if monitor is None:
            return
        self.grace_s = min(self.grace_s, SHUTDOWN_GRACE_S)
        for identity in self.started:
            with contextlib.suppress(Exception):
                await self._kill(monitor, identity, quiet=True)

    def _mark(self, names: Sequence[str], *, busy: str | None, count: int | None) -> None:
        with self._lock:
            self._mark_locked(names, busy=busy, count=count)

    def _mark_locked(
        self, names: Sequence[str], *, busy: str | None, count: int | None, keep: bool = False
    ) -> None:
        """Replace (never mutate) the busy and countdown maps; `keep`: leave countdowns be."""
        busy_map = {k: v for k, v in self.busy.items() if k not in names}
        count_map = dict(self.countdown)
        if not keep:
            count_map = {k: v for k, v in count_map.items() if k not in names}
        if busy is not None:
            busy_map.update(dict.fromkeys(names, busy))
        if count is not None:
            count_map.update(dict.fromkeys(names, count))
        self.busy, self.countdown = busy_map, count_map

    def _say(self, severity: SeverityLevel, text: str) -> None:
        if self.say is not None:
            self.say(self, severity, text)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task}, timeout=10)
