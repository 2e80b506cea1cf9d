"""What a watched host's watcher says of its servers and GPUs, kept for the panels.

The watcher reads them on the box (see watcher.Telemetry); a HostMonitor hands each such
item here, and the UI reads the latest: each server's load by URL, the GPUs with their
history. Kept apart from the monitor so that the run list and the telemetry grow apart.
"""

from __future__ import annotations

from collections.abc import Iterable

from gen_tui.backends.store.progress_file import ServerReport
from gen_tui.backends.telemetry.gpus import Gpu, GpuBoard

__all__ = ["HostTelemetry"]


class HostTelemetry:
    """The latest server loads and GPUs of one host (replaced whole: read from any thread)."""

    def __init__(self) -> None:
        self.loads: dict[str, ServerReport] = {}
        self.board = GpuBoard()
        self.gpus_absent = False
        """The host said it has no nvidia-smi (or no GPU): the strip says nothing of GPUs."""

    def server(self, url: str, report: ServerReport) -> None:
        self.loads = {**self.loads, url: report}

    def keep_only(self, urls: Iterable[str]) -> None:
        """Forget the servers no run here uses any more."""
        wanted = set(urls)
        self.loads = {url: report for url, report in self.loads.items() if url in wanted}

    def gpus(self, sample_gpus: tuple[Gpu, ...], absent: bool, problem: str | None) -> None:
        self.gpus_absent = absent
        if not absent and problem is None:
            self.board.add(sample_gpus)
