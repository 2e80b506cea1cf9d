"""The servers' load, read from their /metrics every few seconds while a run is live.

Off the hot path: its own task, one read per server per interval (bounded in time and
size by the client), so a slow or silent /metrics never holds a request back. What it reads
goes into the run's snapshots (and so progress.json and every panel); a server without
metrics is said once, with how to turn them on, and a failing read is said once per new
reason, never once per poll.

A router serves no /metrics of its own: its workers are read instead (the ones its
`/workers` lists, asked again every few seconds through the client, at most
MAX_WORKERS_READ), kept per worker in `workers`, and summed for the router's own line
(see telemetry/workers.py).

This machine's GPUs are read in the same rounds through NVML (optional, telemetry/nvml.py):
without the package, a driver or a GPU that is said once and no GPU is shown. A run whose
GPUs are shown from elsewhere (the demo's simulated ones, `gpu_telemetry`) says where, once,
and reads no NVML: the log and the GPU strip must not disagree.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from gen_tui.backends.aio import within
from gen_tui.backends.clients.base import InferenceClient, Worker
from gen_tui.backends.clients.http import METRICS_TIMEOUT_S
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.telemetry.gpus import GpuBoard
from gen_tui.backends.telemetry.metrics import (
    ENABLE_HINT,
    MetricsError,
    MetricsReader,
    MetricsUnreachable,
    ServerMetrics,
)
from gen_tui.backends.telemetry.nvml import NvmlAbsent, NvmlError, read_gpus
from gen_tui.backends.telemetry.workers import MAX_WORKERS_READ, OK, WorkerLoad, summed
from gen_tui.backends.untrusted import one_line

GPUS = "gpus"
"""What `_said` keys the GPUs' news under (no server URL is spelled so)."""


class ServerTelemetry(RunPart):
    """Polls each server's /metrics through the client; `latest` holds what was read."""

    def __init__(
        self,
        run: RunContext,
        client: InferenceClient,
        urls: list[str],
        on_read: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(run)
        self.client = client
        self.urls = urls
        self.on_read = on_read
        """Called after each round of reads (the concurrency tuner's cue)."""
        self.interval_s = run.config.metrics_interval_s
        self.latest: dict[str, ServerMetrics | None] = {}
        """Each server's last load (None: it serves no /metrics); absent until first read.
        A router's is its workers' sum."""
        self.workers: dict[str, tuple[WorkerLoad, ...]] = {}
        """Each router's workers as last read (a server that is no router is absent)."""
        self._readers = {url: MetricsReader() for url in urls}
        self._worker_readers: dict[str, MetricsReader] = {}
        self._said: dict[str, str] = {}
        self.gpus = GpuBoard()
        """This machine's GPUs and their recent past (empty without NVML)."""
        self._gpus_absent = False

    async def poll(self) -> None:
        """Read every server once, side by side, and this machine's GPUs."""
        await asyncio.gather(*(self._read(url) for url in self.urls), self._read_gpus())

    async def run(self) -> None:
        """Poll until cancelled, every `interval_s`."""
        while True:
            try:
                await self.poll()
                if self.on_read is not None:
                    self.on_read()
            except Exception as exc:  # the load is a view: its failure must not end the run
                self._say("", "warning", f"reading the servers' /metrics failed: {exc!r}")
            await asyncio.sleep(self.interval_s)

    async def _read(self, url: str) -> None:
        try:  # bounded as a /metrics read is: a hung server must not hold the round back
            listed = await within(self.client.workers(url), METRICS_TIMEOUT_S)
        except TimeoutError:
            listed = None
        if listed is None and url in self.workers:
            # A router that does not answer its listing now is still a router (down, or
            # busy): its workers as last listed are read on.
            listed = tuple(Worker(w.url, w.healthy) for w in self.workers[url])
        if listed is not None:
            # In URL order: the router lists them in an order of its own, which changes.
            ordered = sorted(listed, key=lambda worker: worker.url)
            await self._read_router(url, tuple(ordered[:MAX_WORKERS_READ]))
            return
        try:
            text = await self.client.metrics(url)
            if text is None:
                self.latest[url] = None
                self._say(url, "info", f"server {url} serves no /metrics: {ENABLE_HINT}")
                return
            self.latest[url] = self._readers[url].read(text, time.monotonic())
            self._said.pop(url, None)  # working again: a new failure is news
        except MetricsError as exc:
            self.latest.pop(url, None)  # unknown now, which is not "serves none"
            self._say(url, "warning", f"server {url}: cannot read /metrics: {exc}")

    async def _read_router(self, url: str, listed: tuple[Worker, ...]) -> None:
        """Read each worker of the router at `url` side by side; the router's load is the sum."""
        urls = {worker.url for worker in listed}
        for gone in set(self._worker_readers) - urls:  # a worker the router dropped
            del self._worker_readers[gone]
        loads = await asyncio.gather(*(self._read_worker(worker) for worker in listed))
        self.workers[url] = tuple(loads)
        self.latest[url] = summed(loads)

    async def _read_worker(self, worker: Worker) -> WorkerLoad:
        url = worker.url
        try:
            text = await self.client.metrics(url)
            if text is None:
                self._say(url, "info", f"router worker {url} serves no /metrics: {ENABLE_HINT}")
                return WorkerLoad(url, worker.healthy)
            reader = self._worker_readers.setdefault(url, MetricsReader())
            metrics = reader.read(text, time.monotonic())
            self._said.pop(url, None)
            return WorkerLoad(url, worker.healthy, OK, metrics)
        except MetricsUnreachable as exc:
            self._say(url, "warning", f"router worker {url} is down: {exc}")
            return WorkerLoad(url, worker.healthy, f"down: {exc}")
        except MetricsError as exc:
            self._say(url, "warning", f"router worker {url}: cannot read /metrics: {exc}")
            return WorkerLoad(url, worker.healthy, f"/metrics: {exc}")

    async def _read_gpus(self) -> None:
        if self._gpus_absent:
            return
        if self.config.hooks.gpu_telemetry is not None:  # shown from elsewhere (the demo's)
            self._gpus_absent = True
            self._say(GPUS, "info", f"GPU telemetry: {self.config.hooks.gpu_telemetry}")
            return
        try:
            gpus = await asyncio.to_thread(read_gpus)
        except NvmlAbsent as exc:
            self._gpus_absent = True
            self._say(GPUS, "info", f"no GPU telemetry in this process: {exc}")
            return
        except NvmlError as exc:
            self._say(GPUS, "warning", f"reading this machine's GPUs failed: {exc}")
            return
        self._said.pop(GPUS, None)
        self.gpus.add(gpus)

    def _say(self, url: str, level: str, message: str) -> None:
        """Report `message` unless it is what was last said of `url`."""
        if self._said.get(url) != message:
            self._said[url] = message
            self.reporter.event(level, one_line(message))
