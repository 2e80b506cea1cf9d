"""What `gen-tui run` shows while it works: a live table on a terminal, log lines otherwise.

On a TTY a rich `Live` table (tokens/budget bar, samples, tok/s, ETA, state per dataset) is
redrawn a few times a second with events printed above it. Piped or under nohup, one status
line per dataset every `status_every_s` seconds plus one line per event, so a log file stays
readable and greppable.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import TextIO

from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from gen_tui.app.cli.live_table import budget_text, live_table
from gen_tui.backends.figures import counted, format_count
from gen_tui.backends.progress.snapshot import DatasetSnapshot, RunSnapshot
from gen_tui.backends.progress.summary import summary_line
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.format import (
    cost_text,
    format_duration,
    server_text,
    state_text,
    worker_text,
)

_LEVEL_STYLE = {"error": "bold red", "warning": "yellow", "budget": "bold green", "info": ""}


def status_line(snap: DatasetSnapshot) -> str:
    """One plain line per dataset for logs, in the panel's words for its state ("running",
    "budget reached"), not the engine's ("active", "done")."""
    fraction = snap.fraction
    percent = f" ({fraction * 100:.1f}%)" if fraction is not None else ""
    if snap.max_samples:
        samples = f"{snap.samples:,}/{counted(snap.max_samples, 'sample')}"
    else:
        samples = counted(snap.samples, "sample")
    return (
        f"{snap.name} {state_text(snap.state)}: {budget_text(snap)} tokens{percent}, {samples}, "
        f"{format_count(snap.tok_s)} tok/s, {snap.inflight} in flight, "
        f"ETA {format_duration(snap.eta_s)}"
        + (f", {cost_text(snap)}" if snap.cost is not None else "")
        + (f", {snap.errors:,} failed" if snap.errors else "")
        + (f", {counted(snap.malformed, 'bad line')}" if snap.malformed else "")
    )


def pool_line(snap: RunSnapshot) -> str:
    """The shared slots at a glance: how many requests are in flight now (sent, answer not
    read yet: the panel's header says it in the same words, apart from a server's `run`
    and `q`) and how full the slots were so far."""
    total = f"/{format_count(snap.max_total_tokens)}" if snap.max_total_tokens else ""
    return (
        f"pool: {format_count(snap.tokens)}{total} tokens, {format_count(snap.tok_s)} tok/s, "
        f"{snap.inflight}/{snap.concurrency} in flight, utilisation "
        f"{snap.utilisation * 100:.1f}%"
        + (
            f", concurrency auto {snap.concurrency}: {snap.concurrency_auto}"
            if snap.concurrency_auto is not None
            else ""
        )
    )


def server_lines(snap: RunSnapshot, *, detail: bool) -> list[str]:
    """Each server's load as its /metrics say (the short form unless `detail`); a server
    not read yet is left out unless it is down. A router's workers that are not up follow
    it (a log line per healthy worker every few seconds would bury the news)."""
    lines = []
    for url, state in snap.servers.items():
        if url in snap.server_metrics or state != "ok":
            workers = snap.server_workers.get(url)
            metrics = snap.server_metrics.get(url)
            lines.append(server_text(url, state, metrics, detail=detail, workers=workers))
            lines += [f"worker {worker_text(w, detail=detail)}" for w in workers or () if not w.up]
    return lines


def ended(snap: RunSnapshot) -> RunSnapshot:
    """The run's last snapshot without the servers' load: its last /metrics read was taken
    while the run was still sending (`run 16 q 48 ... 48k tok/s` beside `0 in flight` read as
    a contradiction). A server that is down still says so."""
    return replace(snap, server_metrics={})


class HeadlessDisplay:
    """Receives engine snapshots and events and renders them for a terminal or a log."""

    def __init__(self, stream: TextIO | None = None, status_every_s: float = 10.0) -> None:
        self.stream = stream or sys.stdout
        self.console = Console(file=self.stream, highlight=False)
        self.live_mode = self.console.is_terminal
        self.status_every_s = status_every_s
        self._last_status = 0.0
        self._live: Live | None = None
        self._last: RunSnapshot | None = None
        self._last_block: list[str] = []
        """The status lines last printed (without their time): the run's end prints its
        status again only if it says something new, so a pipe gets one final block."""

    def __enter__(self) -> HeadlessDisplay:
        if self.live_mode:
            self._live = Live(
                Text("starting..."), console=self.console, refresh_per_second=4, transient=False
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            if self._last is not None:
                self._live.update(self._render(ended(self._last)))
            self._live.__exit__(None, None, None)
            self._live = None

    def event(self, level: str, message: str) -> None:
        """One log line. Messages quote servers, files and processes, so they are shown as
        one line with control characters made visible: no escape reaches the terminal and
        no newline forges a line of the log."""
        message = one_line(message)
        stamp = time.strftime("%H:%M:%S")
        if self.live_mode:
            self.console.print(Text(f"{stamp} {message}", style=_LEVEL_STYLE.get(level, "")))
        else:
            print(f"{stamp} {level}: {message}", file=self.stream, flush=True)

    def snapshot(self, snap: RunSnapshot) -> None:
        self._last = snap
        if self._live is not None:
            self._live.update(self._render(snap))
            return
        now = time.monotonic()
        if now - self._last_status >= self.status_every_s:
            self._last_status = now
            self.write_status(snap)

    def write_status(self, snap: RunSnapshot, *, final: bool = False) -> None:
        """One status block; `final` (the run's end) skips a block that says nothing the
        last one did not (its servers' load left out: see `ended`)."""
        if final:
            snap = ended(snap)
        lines = [status_line(dataset) for dataset in snap.datasets]
        if len(snap.datasets) > 1 or snap.concurrency_auto is not None:
            lines.append(pool_line(snap))
        servers = [f"server {line}" for line in server_lines(snap, detail=False)]
        if (
            final
            and lines == self._last_block[: len(lines)]
            and set(servers) <= set(self._last_block[len(lines) :])
        ):
            return
        self._last_block = lines + servers
        stamp = time.strftime("%H:%M:%S")
        for line in self._last_block:
            print(f"{stamp} status: {line}", file=self.stream, flush=True)

    def write_summary(self, snap: RunSnapshot) -> None:
        self.event("info", summary_line(snap))

    def _render(self, snap: RunSnapshot) -> RenderableType:
        return live_table(snap, self.console.width)
