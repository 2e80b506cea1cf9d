"""What a watched host's watcher says of its servers and GPUs, kept for the panels.

The watcher reads them on the box (see watcher.Telemetry); a HostMonitor hands each such
item here, and the UI reads the latest: each server's load by URL, the GPUs with their
history. Kept apart from the monitor so that the run list and the telemetry grow apart.

A figure no newer read replaced for STALE_S is shown as stale, not as the load now: a
telemetry thread held up (a dripping server, a hung nvidia-smi, a watcher that stopped
reading) must never leave a frozen figure that looks current.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from gen_tui.backends import watcher
from gen_tui.backends.store.progress_file import ServerReport
from gen_tui.backends.telemetry.gpus import Gpu, GpuBoard

__all__ = ["STALE_S", "HostTelemetry"]

STALE_S = 5 * watcher.TELEMETRY_S
"""A server's figure older than this (five missed rounds) is said to be stale."""


class HostTelemetry:
    """The latest server loads and GPUs of one host (replaced whole: read from any thread)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._loads: dict[str, tuple[ServerReport, float]] = {}
        self.board = GpuBoard()
        self.gpus_absent = False
        """The host said it has no nvidia-smi (or no GPU): the strip says nothing of GPUs."""
        self.gpus_at: float | None = None
        """When the GPUs were last read (the clock's time); None: never."""

    @property
    def loads(self) -> dict[str, ServerReport]:
        """Each server's load as last read, or "stale: ..." once no read came for STALE_S."""
        now = self._clock()
        return {
            url: report if now - at <= STALE_S else _stale(now - at)
            for url, (report, at) in self._loads.items()
        }

    def server(self, url: str, report: ServerReport) -> None:
        self._loads = {**self._loads, url: (report, self._clock())}

    def keep_only(self, urls: Iterable[str]) -> None:
        """Forget the servers no run here uses any more."""
        wanted = set(urls)
        self._loads = {url: entry for url, entry in self._loads.items() if url in wanted}

    def gpus(self, sample_gpus: tuple[Gpu, ...], absent: bool, problem: str | None) -> None:
        self.gpus_absent = absent
        if not absent and problem is None:
            self.board.add(sample_gpus)
            self.gpus_at = self._clock()

    @property
    def gpus_stale(self) -> bool:
        """Whether the GPUs shown were read longer than STALE_S ago."""
        return self.gpus_at is not None and self._clock() - self.gpus_at > STALE_S


def _stale(age: float) -> ServerReport:
    return ServerReport(f"stale: no reading for {age:.0f} s")
