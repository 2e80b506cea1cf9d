"""The watch stream: live per-dataset totals from the watcher, surviving reconnects.

Live totals come from the stdlib watcher (the `watcher` package, sent as one program), run
over one SSH channel (or as a local subprocess): only counts cross the network, and after a
reconnect it resumes from its byte offsets, so nothing is counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncssh

from gen_tui.backends import watcher
from gen_tui.backends.aio import stop, within
from gen_tui.backends.hosts.connection import describe
from gen_tui.backends.hosts.errors import RunError
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.store.progress_file import ProgressFile, ServerReport
from gen_tui.backends.store.prompts import check_dataset_name
from gen_tui.backends.telemetry.gpus import Gpu, parse_gpus
from gen_tui.backends.telemetry.metrics import MetricsError, MetricsReader, ServerMetrics
from gen_tui.backends.telemetry.nvml import NvmlAbsent, NvmlError
from gen_tui.backends.telemetry.workers import MAX_WORKERS_READ, OK, WorkerLoad, summed
from gen_tui.backends.untrusted import one_line


@dataclass(frozen=True)
class DatasetTotals:
    """One dataset's totals as the watcher last reported them (always a full recount's)."""

    dataset: str
    tokens: int
    samples: int
    exists: bool
    offset: int
    locked: bool
    lock_pid: int | None
    mtime: float | None
    bad_lines: int
    progress: ProgressFile | None
    """The writer's progress.json, when there is one (fields of a wrong type left out)."""
    progress_fresh: bool
    received_at: float
    truncated: int = 0
    """Of `samples`, the records cut at their cap (the truncation rule, counted by the
    watcher for any writer: a foreign script publishes no figures of its own)."""
    problem: str | None = None
    """What was wrong with one of its files (a FIFO, an oversized progress.json...), one
    line from the watcher: said for this dataset, never a reason to stop watching."""


def dataset_totals(message: dict[str, Any], kept: ProgressFile | None = None) -> DatasetTotals:
    """A watcher's `dataset` line as the panel takes it: its counts, its writer's
    progress.json (each field range-checked by ProgressFile), its problem in one line. A
    line without `progress` (the watcher sends it only when it changed) keeps `kept`, the
    one the dataset's last line carried."""
    progress = ProgressFile.parse(message["progress"]) if "progress" in message else kept
    problem = message.get("problem")
    return DatasetTotals(
        dataset=str(message["dataset"]),
        tokens=int(message["tokens"]),
        samples=int(message["samples"]),
        exists=bool(message["exists"]),
        offset=int(message["offset"]),
        locked=bool(message["locked"]),
        lock_pid=message.get("lock_pid"),
        mtime=message.get("mtime"),
        bad_lines=int(message.get("bad_lines", 0)),
        truncated=min(max(0, int(message.get("truncated", 0))), int(message["samples"])),
        progress=progress,
        progress_fresh=bool(message.get("progress_fresh")),
        received_at=time.time(),
        problem=one_line(problem, 300) if isinstance(problem, str) else None,
    )


@dataclass(frozen=True)
class WatchStatus:
    """The stream's own state: "watching", "stale: ...", "disconnected: ...", "closed"."""

    state: str


@dataclass(frozen=True)
class ServerLoad:
    """A server's load as the watcher read its /metrics on the box (None: it serves none)."""

    url: str
    report: ServerReport


@dataclass(frozen=True)
class GpuSample:
    """The box's GPUs from nvidia-smi; `absent` (once) when it has none or no nvidia-smi,
    `problem` when nvidia-smi failed."""

    gpus: tuple[Gpu, ...]
    absent: bool = False
    problem: str | None = None


WatchItem = DatasetTotals | WatchStatus | ServerLoad | GpuSample


class LineSource(Protocol):
    """Lines of a process's output (the watcher's, a script's); "" once it has ended."""

    async def readline(self) -> str: ...

    async def close(self) -> None: ...


Opener = Callable[[list[str]], Awaitable[LineSource]]


class Watch:
    """Async iterator of :class:`DatasetTotals` (and :class:`WatchStatus` changes).

    It runs the watcher, restarts it from the last reported offsets whenever the stream ends
    or goes quiet for longer than `stale_after_s` (three missed heartbeats), and so survives
    reconnects without recounting or double counting. `totals` holds the latest per dataset.
    """

    def __init__(
        self,
        opener: Opener,
        output_dir: str,
        datasets: Sequence[str],
        heartbeat_s: float = watcher.HEARTBEAT_S,
        interval_s: float = watcher.POLL_S,
        stale_after_s: float | None = None,
        resume: Mapping[str, str] | None = None,
        metrics_urls: Sequence[str] = (),
        telemetry_s: float = watcher.TELEMETRY_S,
    ) -> None:
        self._opener = opener
        self.metrics_urls = tuple(metrics_urls)
        """The servers whose /metrics the watcher reads on the box (see argv.server_urls)."""
        self.telemetry_s = telemetry_s
        self._readers = {url: MetricsReader() for url in self.metrics_urls}
        self._worker_reads: dict[str, dict[str, tuple[str, ServerMetrics | None]]] = {}
        """Each router's workers as last read (state, load), by worker URL."""
        self._worker_readers: dict[str, MetricsReader] = {}
        self.output_dir = output_dir
        self.datasets = tuple(check_dataset_name(name) for name in datasets)
        self.heartbeat_s = heartbeat_s
        self.interval_s = interval_s
        self.stale_after_s = stale_after_s or 3 * heartbeat_s + 1
        self.totals: dict[str, DatasetTotals] = {}
        self.status = "starting"
        self.restarts = 0
        self.last_seen: float | None = None
        resume = resume or {}
        self._resume = {name: resume.get(name, name) for name in self.datasets}
        self._queue: asyncio.Queue[WatchItem | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.local_gpus: Callable[[], tuple[Gpu, ...]] | None = None
        """This machine's GPUs read in-process (NVML), in place of the watcher's nvidia-smi
        once they answer; set before iterating (LocalHost does)."""
        self._nvml: bool | None = None
        self._gpu_task: asyncio.Task[None] | None = None
        self.broken: str | None = None
        """Why the stream ended on a fault nothing expected (None: it did not)."""

    def offsets(self) -> dict[str, str]:
        """Each dataset's resume argument: a new Watch seeded with it counts nothing twice."""
        return dict(self._resume)

    def args(self) -> list[str]:
        """The watcher's arguments now: each dataset from its last committed offset."""
        return [
            f"--interval={self.interval_s:g}",
            f"--heartbeat={self.heartbeat_s:g}",
            f"--telemetry={self.telemetry_s:g}",
            *(f"--metrics-url={url}" for url in self.metrics_urls),
            "--",
            self.output_dir,
            *(self._resume[name] for name in self.datasets),
        ]

    def __aiter__(self) -> AsyncIterator[WatchItem]:
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._pump())
            if self.local_gpus is not None:
                self._gpu_task = asyncio.create_task(self._read_local_gpus(self.local_gpus))
        return self

    async def __anext__(self) -> WatchItem:
        if self._task is None and not self._closed:
            self.__aiter__()
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        self._closed = True
        await stop(self._gpu_task)
        await stop(self._task)
        self._set_status("closed")
        self._queue.put_nowait(None)

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _set_status(self, state: str) -> None:
        if state != self.status:
            self.status = state
            self._queue.put_nowait(WatchStatus(state))

    async def _pump(self) -> None:
        """The stream, until closed. A fault nothing here expects (a bug of ours, say) ends
        it saying so, never silently: the reader is told the stream ended and `broken` says
        why, so its monitor starts a new one from the same offsets at its next survey.
        Before, the task died with the error unseen and its reader waited forever: that
        host's totals never came (issue 31's residual 5 asked where a stream could stall)."""
        try:
            await self._follow()
        except Exception as exc:
            self.broken = one_line(f"{type(exc).__name__}: {exc}", 200)
            self._set_status(f"disconnected: the watch stream broke ({self.broken})")
            self._queue.put_nowait(None)

    async def _follow(self) -> None:
        failures = 0
        while not self._closed:
            try:
                source = await self._opener(self.args())
            except (RunError, SSHError, OSError, asyncssh.Error) as exc:
                failures += 1
                self._set_status(f"disconnected: {describe(exc)}")
                await asyncio.sleep(min(30.0, 0.5 * 2**failures))
                continue
            try:
                reason = await self._read(source)
            finally:
                with contextlib.suppress(Exception):
                    await source.close()
            if reason is None:
                return
            self.restarts += 1
            self._set_status(reason)
            failures = 0 if self.last_seen else failures + 1
            await asyncio.sleep(min(5.0, 0.25 * 2**failures))

    async def _read(self, source: LineSource) -> str | None:
        while True:
            try:
                line = await within(source.readline(), self.stale_after_s)
            except ValueError:  # a line over the reader's limit: restart the stream
                return "stale: the watcher sent a line over the length limit"
            except TimeoutError:
                return f"stale: no word from the watcher for {self.stale_after_s:g} s"
            except (OSError, asyncssh.Error) as exc:
                return f"disconnected: {describe(exc)}"
            if not line:
                return "disconnected: the watcher stream ended"
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a remote login banner or the like: not ours
            if not isinstance(message, dict):
                continue
            self.last_seen = time.monotonic()
            kind = message.get("type")
            if kind == "hello":
                self._set_status("watching")
            elif kind == "dataset":
                self._dataset(message)
            elif kind == "metrics":
                self._metrics(message)
            elif kind == "gpus" and not self._nvml:
                self._queue.put_nowait(_gpus(message))
            elif kind == "error":
                self._set_status(f"failed: {message.get('message')}")
                self._queue.put_nowait(None)
                return None

    async def _read_local_gpus(self, read: Callable[[], tuple[Gpu, ...]]) -> None:
        """The GPUs from `read` every `telemetry_s`, in a thread (a driver call per field).
        Without NVML the watcher's nvidia-smi reading stands, and says once if there is none;
        a failed read is said once per new reason, as the watcher says nvidia-smi's."""
        last: GpuSample | None = None
        while not self._closed:
            try:
                sample = GpuSample(await asyncio.to_thread(read))
            except NvmlAbsent:
                self._nvml = False
                return
            except NvmlError as exc:
                sample = GpuSample((), problem=one_line(str(exc), 300))
            self._nvml = True
            if sample.gpus or sample != last:
                self._queue.put_nowait(sample)
            last = sample
            await asyncio.sleep(self.telemetry_s)

    def _dataset(self, message: dict[str, Any]) -> None:
        name = message.get("dataset")
        if name not in self._resume:
            return
        self._resume[name] = str(message["resume"])
        last = self.totals.get(str(name))
        totals = dataset_totals(message, last.progress if last is not None else None)
        self.totals[totals.dataset] = totals
        self._queue.put_nowait(totals)

    def _metrics(self, message: dict[str, Any]) -> None:
        """A server's /metrics as read on the box, parsed here (the box has no parser). For
        a router, a line per worker comes first (`router`: whose), then the router's own
        with the listing (`workers`): its load is theirs summed, as a run's own is."""
        url, router = message.get("url"), message.get("router")
        if not isinstance(url, str) or (router or url) not in self._readers:
            return
        if isinstance(router, str):
            if watcher.worker_url(url) == url:
                reader = self._worker_readers.setdefault(url, MetricsReader())
                reads = self._worker_reads.setdefault(router, {})
                reads[url] = _read(message, reader, down="down")
                if len(reads) > 2 * MAX_WORKERS_READ:  # workers the router dropped long ago
                    del reads[next(iter(reads))]
            return
        listing = message.get("workers")
        if isinstance(listing, list):
            reads = self._worker_reads.get(url, {})
            loads = tuple(
                WorkerLoad(worker["url"], worker.get("healthy") is not False, *reads[worker["url"]])
                for worker in listing[:MAX_WORKERS_READ]
                if isinstance(worker, dict) and worker.get("url") in reads
            )
            self._queue.put_nowait(ServerLoad(url, ServerReport(OK, summed(loads), workers=loads)))
            return
        state, metrics = _read(message, self._readers[url], down="unreachable")
        self._queue.put_nowait(ServerLoad(url, ServerReport(state, metrics)))


def _read(
    message: dict[str, Any], reader: MetricsReader, down: str
) -> tuple[str, ServerMetrics | None]:
    """(state, load) of one `metrics` line: OK and None for a server without /metrics, OK
    and its load, or why not (`down`: the word for one that did not answer)."""
    text, error = message.get("text"), message.get("error")
    if message.get("absent"):
        return OK, None
    if isinstance(text, str):
        try:
            return OK, reader.read(text, time.monotonic())
        except MetricsError as exc:
            return one_line(f"/metrics: {exc}", 300), None
    return one_line(f"{down}: {error}", 300), None


def _gpus(message: dict[str, Any]) -> GpuSample:
    error = message.get("error")
    return GpuSample(
        parse_gpus(message.get("gpus")),
        absent=bool(message.get("absent")),
        problem=one_line(error, 300) if isinstance(error, str) else None,
    )
