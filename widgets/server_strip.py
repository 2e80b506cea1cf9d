"""The servers' load under the header: what the GPU box is doing, beside what lands on disk.

A user watching tokens climb cannot otherwise tell a saturated server from a queuing, a
retracting or an idle one. One line at 80×24 (every server's short form, side by side, as
many as fit); one line per server, every field, when the terminal is tall.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.widgets.format import server_text

TALL_SCREEN = 40
"""Rows from which each server gets its own line (a 48-row terminal has room; 24 has not)."""
MAX_LINES = 4
"""The most lines the strip takes, however many servers (the rest: "+N more")."""


@dataclass(frozen=True)
class ServerLine:
    """One server as the strip shows it: its URL, its state and its load (None: no /metrics)."""

    url: str
    state: str
    metrics: ServerMetrics | None


def strip_lines(servers: tuple[ServerLine, ...], width: int, *, tall: bool) -> list[str]:
    """The strip's text: one line of short forms, or (tall) a line per server in full."""
    if not servers:
        return []
    if tall:
        shown = servers if len(servers) <= MAX_LINES else servers[: MAX_LINES - 1]
        lines = [f"srv {server_text(s.url, s.state, s.metrics, detail=True)}" for s in shown]
        if len(shown) < len(servers):
            lines.append(f"    +{len(servers) - len(shown)} more servers")
        return lines
    parts = [server_text(s.url, s.state, s.metrics, detail=False) for s in servers]
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
    return [line]


class ServerStrip(Widget):
    """The servers' load, redrawn when its view changes; hidden while there is nothing to say."""

    DEFAULT_CSS = """
    ServerStrip { height: auto; }
    """

    view: reactive[tuple[ServerLine, ...]] = reactive(tuple, layout=True)
    tall: reactive[bool] = reactive(False, layout=True)

    def render(self) -> Text:
        lines = strip_lines(self.view, self.size.width or 80, tall=self.tall)
        return Text("\n".join(lines), no_wrap=True, overflow="ellipsis")

    def show(self, servers: tuple[ServerLine, ...], *, tall: bool) -> None:
        """Show `servers` (only when changed: an equal view costs no redraw)."""
        if servers != self.view:
            self.view = servers
        if tall != self.tall:
            self.tall = tall
        self.display = bool(servers)
