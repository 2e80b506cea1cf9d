"""One host's runs and dataset totals, kept fresh: what a panel and the run table show.

A :class:`HostMonitor` looks at its host every couple of seconds (`Host.survey`: the
processes that generate data and the dataset folders under the output directory) and keeps
one watcher stream open for the datasets it knows, so token totals arrive as they are
written and always equal a full recount. Datasets found later (a run started on another
dataset, a folder that appears) join the stream without recounting the others: the new
watcher starts from the old one's offsets.

It is plain asyncio and knows nothing of Textual: the app reads its attributes from another
thread (each is replaced whole, never mutated in place) and sends it work through
:meth:`kill` and :meth:`resume` on its loop. A failed look (a dropped link) is retried with
backoff; an untrusted host key is final, because retrying cannot fix it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence

from gen_tui.backends import watcher
from gen_tui.backends.aio import stop, wait_event
from gen_tui.backends.figures import CountError, parse_count
from gen_tui.backends.host_status import RETRY
from gen_tui.backends.hosts import (
    SAMPLE_FLAGS,
    TOKEN_FLAGS,
    DatasetTotals,
    GpuSample,
    Host,
    KillOutcome,
    RunError,
    RunIdentity,
    RunProcess,
    ServerLoad,
    Survey,
    TickCallback,
    Watch,
    WatchStatus,
    server_urls,
)
from gen_tui.backends.hosts.connection import HostKeyError
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.hosts.telemetry import HostTelemetry
from gen_tui.backends.hosts.watched import watched_snapshot
from gen_tui.backends.progress.rate import RateMeter
from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.backends.store.progress_file import (
    PoolFigures,
    ProgressFile,
    ServerReport,
    merge_writer_reports,
)
from gen_tui.backends.telemetry.workers import OK

SURVEY_S = 2.0
FOLLOW_S = 0.25
FOLLOW_FOR_S = 5.0
"""After a run let go of a dataset's lock, the host is surveyed every FOLLOW_S for up to
FOLLOW_FOR_S, until the run is seen gone (see `HostMonitor._next_survey_s`)."""
MAX_ENDED = 20
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)


def budget_from_argv(argv: Sequence[str]) -> tuple[int | None, int | None]:
    """(max_tokens, max_samples) a run's command line asks for, when it says."""
    found: list[int | None] = []
    for flags in (TOKEN_FLAGS, SAMPLE_FLAGS):
        value = watcher.flag_value(list(argv), *flags)
        try:
            found.append(parse_count(value) if value is not None else None)
        except CountError:
            found.append(None)
    return found[0], found[1]


class HostMonitor:
    """Runs and per-dataset totals of one host (see the module docstring).

    `datasets` are watched from the start; with `discover`, the dataset folders of the
    output directory and the datasets of runs writing there are added as they appear.
    """

    def __init__(
        self,
        host: Host,
        datasets: Sequence[str] = (),
        *,
        discover: bool = True,
        survey_s: float = SURVEY_S,
        on_change: Callable[[], None] | None = None,
        servers: Sequence[str] = (),
    ) -> None:
        self.host = host
        self.configured = tuple(servers)
        """Servers to read on the host whatever its runs name (a `[[hosts]]` entry's)."""
        self.name = host.name
        self.discover = discover
        self.survey_s = survey_s
        self.on_change = on_change
        self.datasets: tuple[str, ...] = tuple(datasets)
        self.runs: tuple[RunProcess, ...] = ()
        self.ended: tuple[RunProcess, ...] = ()
        """Runs seen before and gone since, newest first: what `r` can start again."""
        self.totals: dict[str, DatasetTotals] = {}
        self.state = "connecting"
        self.problem: str | None = None
        """What the last survey found wrong with the output folder ("... does not exist")."""
        self.watch_state = ""
        self.output_dir = host.output_dir
        self.failure: str | None = None
        self.ready = asyncio.Event()
        self.telemetry = HostTelemetry()
        """The servers' load and the GPUs, as the watcher reads them on the host."""
        self._rates: dict[str, RateMeter] = {}
        self._let_go: dict[str, tuple[int, float]] = {}
        """Datasets whose lock the run holding it has released since (dataset -> its pid,
        when): that run is ending, whatever the last survey, up to SURVEY_S old, says."""
        self._budgets: dict[str, tuple[int | None, int | None]] = {}
        self._watch: Watch | None = None
        self._pump: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._refreshing = asyncio.Lock()

    # the loop

    async def run(self) -> None:
        """Survey and watch until cancelled; a host-key refusal ends it (see `failure`)."""
        failures = 0
        try:
            while True:
                self._wake.clear()  # here, so a poke while surveying cuts the next sleep
                try:
                    await self._connect()
                    await self.refresh()
                    failures = 0
                except HostKeyError as exc:
                    self.failure = str(exc)
                    self._set_state(f"refused: {exc}")
                    self.ready.set()
                    return
                except (SSHError, RunError, OSError) as exc:
                    failures += 1
                    delay = BACKOFF_S[min(failures, len(BACKOFF_S)) - 1]
                    self._set_state(f"disconnected: {_first_line(exc)}{RETRY}{delay:g}s)")
                    self.ready.set()
                    await self._sleep(delay)
                    continue
                await self._sleep(self._next_survey_s())
        finally:
            await self._close_watch()

    async def _connect(self) -> None:
        connect = getattr(self.host, "connect", None)
        connection = getattr(self.host, "connection", None)
        if connect is not None and (connection is None or connection.state != "connected"):
            await connect()

    async def _sleep(self, seconds: float) -> None:
        """Sleep, or less if poked since the survey began."""
        await wait_event(self._wake, seconds)

    def _next_survey_s(self) -> float:
        """SURVEY_S; FOLLOW_S for FOLLOW_FOR_S after a run let go of a lock while the
        survey still lists it: it is exiting, and `R` offers it once the survey sees it gone
        (a process that lives on after letting go, a panel whose hosted run ended, is looked
        at often only that long)."""
        now = time.monotonic()
        if any(now - when < FOLLOW_FOR_S for _, when in self._let_go.values()):
            return min(self.survey_s, FOLLOW_S)
        return self.survey_s

    def poke(self) -> None:
        """Survey again now (after a kill or a start), not at the next tick."""
        self._wake.set()

    async def refresh(self) -> Survey:
        """One survey: runs, discovered datasets, and the watcher stream kept in step."""
        async with self._refreshing:  # the loop's and a kill's or resume's never interleave
            return await self._refresh()

    async def _refresh(self) -> Survey:
        import asyncssh

        try:
            survey = await self.host.survey()
        except asyncssh.Error as exc:
            raise SSHError(str(exc)) from exc
        gone = [run for run in self.runs if not _listed(run, survey.runs)]
        if gone:
            kept = [run for run in self.ended if not _listed(run, gone)]
            self.ended = (*gone, *kept)[:MAX_ENDED]
        self.runs = survey.runs
        self.output_dir = survey.output_dir
        listed = {run.pid for run in survey.runs}
        self._let_go = {name: gone for name, gone in self._let_go.items() if gone[0] in listed}
        # Only runs writing the watched folder shape its panels: a B2 another project's run
        # writes elsewhere on the box, with its --max-samples, is another dataset (issue 31,
        # point 1). Its budget must not become ours, nor a flag of our `r`.
        mine = [run for run in survey.runs if run.output_dir == survey.output_dir]
        for run in mine:
            for name in run.datasets:
                self._budgets[name] = budget_from_argv(run.identity.cmdline)
        if self.discover:
            found = list(self.datasets)
            for name in [*survey.folders, *(n for run in mine for n in run.datasets)]:
                if name not in found:
                    found.append(name)
            self.datasets = tuple(found)
        if survey.problem != self.problem:
            self.problem = survey.problem
            self._changed()
        self._set_state("connected")
        await self._keep_watch()
        self.ready.set()
        self._changed()
        return survey

    async def _keep_watch(self) -> None:
        names = self.datasets
        # Only our own runs' servers: the watcher may run as root, and a GET to whatever URL
        # another user's command line names is theirs to aim (issue 30, point 6c).
        mine = [run for run in self.runs if run.mine and run.output_dir == self.output_dir]
        named = {url for run in mine for url in server_urls(run.identity.cmdline)}
        urls = tuple(sorted(named.union(self.configured)))
        watch = self._watch
        if (
            watch is not None
            and watch.broken is None  # a broken stream is started again, from its offsets
            and (watch.datasets, watch.metrics_urls) == (names, urls)
        ):
            return
        offsets = watch.offsets() if watch is not None else None
        await self._close_watch()
        self.telemetry.keep_only(urls)
        if not names and not urls:  # configured servers are read before any dataset exists
            return
        self._watch = self.host.watch(self.output_dir, names, resume=offsets, metrics_urls=urls)
        self._pump = asyncio.create_task(self._consume(self._watch))

    async def _consume(self, watch: Watch) -> None:
        async for item in watch:
            if isinstance(item, WatchStatus):
                self.watch_state = item.state
            elif isinstance(item, ServerLoad):
                self.telemetry.server(item.url, item.report)
            elif isinstance(item, GpuSample):
                self.telemetry.gpus(item.gpus, item.absent, item.problem)
            else:
                self._rates.setdefault(item.dataset, RateMeter()).add(
                    time.monotonic(), item.tokens, item.samples
                )
                self._note_lock(self.totals.get(item.dataset), item)
                self.totals = {**self.totals, item.dataset: item}
            self._changed()

    def _note_lock(self, before: DatasetTotals | None, now: DatasetTotals) -> None:
        """A run lets go of a dataset's lock only as it ends (the record sink's close): the
        watcher sees that within its half-second poll, the survey up to SURVEY_S later. Till
        then `r` said "pid N still writes it" of a run that had ended (issue 31); the lock
        says at once that it no longer does, and a survey is asked for now."""
        if now.locked:
            self._let_go.pop(now.dataset, None)
        elif before is not None and before.locked and before.lock_pid is not None:
            self._let_go[now.dataset] = (before.lock_pid, time.monotonic())
            self.poke()

    async def _close_watch(self) -> None:
        watch, pump = self._watch, self._pump
        self._watch = self._pump = None
        if watch is not None:
            await watch.aclose()
        await stop(pump)

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # what the UI asks

    @property
    def status(self) -> str:
        """The host's state for a person: the survey's, unless the watch stream is down."""
        if self.state == "connected" and self.watch_state.startswith(("disconnected", "stale")):
            return self.watch_state
        if self.state == "connected" and self.problem:
            return self.problem
        return self.state

    def writer(self, dataset: str) -> RunProcess | None:
        """The live run writing `dataset` here: the lock holder or the record file's writer
        (`RunProcess.writing`), else a run of ours whose command line names it (starting,
        not writing yet). Another user's command line never makes a writer: their `sleep`
        naming our dataset blocked `r` and was offered to `k`."""
        # Only runs writing here: a B2 in another folder of the same machine is not ours;
        # nor the run that has let go of its lock since the survey listed it.
        gone = self._let_go.get(dataset, (None, 0.0))[0]
        runs = [run for run in self.runs if run.output_dir == self.output_dir and run.pid != gone]
        for run in runs:
            if dataset in run.writing:
                return run
        for run in runs:
            if run.mine and dataset in run.datasets:
                return run
        totals = self.totals.get(dataset)
        if totals is not None and totals.locked and totals.lock_pid is not None:
            return next((run for run in runs if run.pid == totals.lock_pid), None)
        return None

    def snapshot(self, dataset: str, now: float | None = None) -> DatasetSnapshot | None:
        """The panel's figures: counts from the records, the rest from the writer."""
        totals = self.totals.get(dataset)
        if totals is None:
            return None
        now = time.monotonic() if now is None else now
        return watched_snapshot(
            totals,
            self.writer(dataset),
            self._rates.get(dataset, RateMeter()).rates(now),
            self._budgets.get(dataset, (None, None)),
            self.name,
        )

    def last_rate(self, dataset: str) -> float:
        """`dataset`'s tok/s when it last produced (0: never seen producing)."""
        meter = self._rates.get(dataset)
        return meter.last_tok_s if meter is not None else 0.0

    def servers(self) -> dict[str, ServerReport]:
        """The load of the servers this host's live runs use: as the watcher read it on the
        host, else (and for a router) as their writers last said in progress.json."""
        found: dict[str, ServerReport] = dict(self.telemetry.loads)
        for dataset, totals in self.totals.items():
            progress = totals.progress
            if progress is None or not progress.servers or not totals.progress_fresh:
                continue
            writer = self.writer(dataset)
            if writer is None or progress.pid != writer.pid:
                continue
            merge_writer_reports(found, progress.servers)
        return found

    def pools(self) -> dict[int, PoolFigures]:
        """The pool of each live run writing here (by pid), as its writer's fresh
        progress.json last said it: every dataset file of a run carries the same pool, so
        it is counted once per run. A stale file or one of another pid says nothing."""
        found: dict[int, PoolFigures] = {}
        for pid, pool, _ in self._live_pools():
            found.setdefault(pid, pool)
        return found

    def _live_pools(self) -> Iterator[tuple[int, PoolFigures, ProgressFile]]:
        """(pid, pool, progress) of each dataset whose fresh progress.json carries a pool and was
        written by the live writer of that dataset (a stale file or another pid's says
        nothing): what :meth:`pools` and :meth:`pool_servers` read."""
        for dataset, totals in self.totals.items():
            progress = totals.progress
            if progress is None or progress.pool is None or not totals.progress_fresh:
                continue
            writer = self.writer(dataset)
            if writer is not None and progress.pid == writer.pid:
                yield writer.pid, progress.pool, progress

    def pool_servers(self) -> dict[str, str]:
        """The servers the live runs counted in :meth:`pools` use, as each writer's fresh
        progress.json names them, with the state it says of each ("ok" or why not, its
        engine's own health: untrusted words): whose load and health the header sets beside
        their pools'. A server two runs name is down if either says so."""
        found: dict[str, str] = {}
        for _, _, progress in self._live_pools():
            for url, report in (progress.servers or {}).items():
                if found.get(url, OK) == OK:
                    found[url] = report.state
        return found

    # what the UI does

    async def kill(
        self, identity: RunIdentity, grace_s: float, on_tick: TickCallback | None = None
    ) -> KillOutcome:
        """Stop a run (identity-checked by the host before each signal), then look again."""
        try:
            outcome = await self.host.kill(identity, grace_s, on_tick=on_tick)
        finally:
            self.poke()
        # Look again before reporting, so that whoever reads the outcome also sees the run
        # list without it (and `r` is not refused because of a run that is gone).
        await self._look_again()
        return outcome

    def datasets_of(self, identity: RunIdentity) -> tuple[str, ...]:
        run = next((r for r in self.runs if r.identity.same_process(identity)), None)
        return run.datasets if run is not None else ()

    async def resume(
        self, dataset: str, max_tokens: int | None, max_samples: int | None = None
    ) -> RunIdentity:
        """Start `dataset` again with a new budget (the host refuses a second writer)."""
        identity = await self.host.resume(dataset, max_tokens, max_samples=max_samples)
        self._budgets[dataset] = (max_tokens, max_samples)
        await self._look_again()
        return identity

    async def start(
        self, datasets: Sequence[str], max_tokens: int | None, max_samples: int | None = None
    ) -> RunIdentity:
        """Start `datasets` as one new run from the host's run command (a second writer
        is refused, as for a resume); None budgets: the command's own."""
        identity = await self.host.resume(
            datasets[0], max_tokens, max_samples=max_samples, datasets=datasets
        )
        for name in datasets:
            if max_tokens is not None or max_samples is not None:
                self._budgets[name] = (max_tokens, max_samples)
        await self._look_again()
        return identity

    async def resume_run(self, run: RunProcess, max_tokens: int | None) -> RunIdentity:
        """Start an ended run again, as it was launched, with a new token budget."""
        identity = await self.host.resume(run, max_tokens)
        for name in run.datasets if run.output_dir == self.output_dir else ():
            self._budgets[name] = (max_tokens, self._budgets.get(name, (None, None))[1])
        await self._look_again()
        return identity

    async def _look_again(self) -> None:
        """Survey after a start; a dropped link then must not turn a started run into an
        error (the loop's next survey, once the link heals, lists it)."""
        try:
            await self.refresh()
        except (SSHError, RunError, OSError):
            self.poke()

    async def close(self) -> None:
        await self._close_watch()
        await self.host.close()


def _listed(run: RunProcess, runs: Sequence[RunProcess]) -> bool:
    return any(run.identity.same_process(other.identity) for other in runs)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
