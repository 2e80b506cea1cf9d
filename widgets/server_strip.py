"""The servers' load under the header: what the GPU box is doing, beside what lands on disk.

A user watching tokens climb cannot otherwise tell a saturated server from a queuing, a
retracting or an idle one. One line at 80×24 (every server's short form, side by side, as
many as fit); one line per server, every field, when the terminal is tall. A router's
workers follow, one indented line each (a few at 80×24, more when tall), since a router's
sum hides the one worker that is down or queuing.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.backends.telemetry.workers import WorkerLoad
from gen_tui.widgets.format import server_text, worker_text

TALL_SCREEN = 40
"""Rows from which each server gets its own line (a 48-row terminal has room; 24 has not)."""
MAX_LINES = 4
"""The most lines the strip takes, however many servers (the rest: "+N more")."""
WORKER_LINES = 2
"""The most lines a compact strip gives routers' workers (two workers show at 80×24)."""
TALL_WORKER_LINES = 8
"""The same, when tall."""
INDENT = "    "
"""A worker's line starts under its router's name (past "srv ")."""


@dataclass(frozen=True)
class ServerLine:
    """One server as the strip shows it: its URL, its state and its load (None: no /metrics)."""

    url: str
    state: str
    metrics: ServerMetrics | None
    workers: tuple[WorkerLoad, ...] | None = None
    """A router's workers (`metrics` is then their sum); None: no router."""
    supervised: str = ""
    """Its supervisor's word when gen-tui keeps it up ("gpu0: healthy"), after its name."""

    def text(self, *, detail: bool) -> str:
        """This server's part of the strip (a router's says how many workers are healthy)."""
        text = server_text(self.url, self.state, self.metrics, detail=detail, workers=self.workers)
        if not self.supervised:
            return text
        name, _, load = text.partition(" ")
        return f"{name} {self.supervised} · {load}"


def worker_lines(server: ServerLine, room: int, *, detail: bool) -> list[str]:
    """A router's workers, a line each, in at most `room` lines (the last then counts the
    rest)."""
    workers = server.workers or ()
    if room <= 0 or not workers:
        return []
    shown = workers if len(workers) <= room else workers[: room - 1]
    lines = [f"{INDENT}{worker_text(worker, detail=detail)}" for worker in shown]
    if len(shown) < len(workers):
        lines.append(f"{INDENT}+{len(workers) - len(shown)} more workers")
    return lines


def strip_lines(servers: tuple[ServerLine, ...], width: int, *, tall: bool) -> list[str]:
    """The strip's text: one line of short forms, or (tall) a line per server in full;
    then (under each router, when tall) the routers' workers."""
    if not servers:
        return []
    if tall:
        shown = servers if len(servers) <= MAX_LINES else servers[: MAX_LINES - 1]
        room = TALL_WORKER_LINES
        lines = []
        for server in shown:
            lines.append(f"srv {server.text(detail=True)}")
            below = worker_lines(server, room, detail=True)
            lines += below
            room -= len(below)
        if len(shown) < len(servers):
            lines.append(f"{INDENT}+{len(servers) - len(shown)} more servers")
        return lines
    lines = [_compact_line(servers, width)]
    room = WORKER_LINES
    for server in servers:
        below = worker_lines(server, room, detail=False)
        lines += below
        room -= len(below)
    return lines


def _compact_line(servers: tuple[ServerLine, ...], width: int) -> str:
    """Every server's short form side by side, as many as fit `width` (then "+N more")."""
    parts = [s.text(detail=False) for s in servers]
    line = f"srv {parts[0]}"  # the first is shown whatever the width (cut by the widget)
    shown = 1
    for part in parts[1:]:
        after = len(parts) - shown - 1
        tail = f" +{after} more" if after else ""
        if len(line) + 3 + len(part) + len(tail) > width:
            break
        line += f" │ {part}"
        shown += 1
    if shown < len(parts):
        line += f" +{len(parts) - shown} more"
    return line


class ServerStrip(Widget):
    """The servers' load, redrawn when its view changes; hidden while there is nothing to say."""

    DEFAULT_CSS = """
    ServerStrip { height: auto; }
    """

    view: reactive[tuple[ServerLine, ...]] = reactive(tuple)
    """A new view repaints the strip; its height changes only with its line count, and
    only then does `show` ask for a layout (a layout on every figure's change cost the
    whole screen's arrangement four times a second)."""
    tall: reactive[bool] = reactive(False, layout=True)

    def render(self) -> Text:
        lines = strip_lines(self.view, self.size.width or 80, tall=self.tall)
        return Text("\n".join(lines), no_wrap=True, overflow="ellipsis")

    @property
    def line_count(self) -> int:
        """The lines it takes above the board (0 while hidden): the layout's to plan for."""
        if not self.view:
            return 0
        return len(strip_lines(self.view, self.size.width or 80, tall=self.tall))

    def show(self, servers: tuple[ServerLine, ...], *, tall: bool) -> None:
        """Show `servers` (only when changed: an equal view costs no redraw)."""
        if servers != self.view:
            lines = self.line_count
            self.view = servers
            if self.line_count != lines:
                self.refresh(layout=True)
        if tall != self.tall:
            self.tall = tall
        self.display = bool(servers)
