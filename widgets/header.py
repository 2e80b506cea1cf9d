"""The one-line header: run state and totals across every dataset on screen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gen_tui.backends.figures import format_count
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.format import format_dollars

STATES = ("idle", "watching", "starting", "running", "paused", "stopping", "aborting", "quitting")


@dataclass(frozen=True)
class HeaderView:
    state: str = "idle"
    """One of STATES."""
    tokens: int = 0
    tok_s: float = 0.0
    done: int = 0
    total: int = 0
    inflight: int = 0
    concurrency: int = 0
    utilisation: float | None = None
    server_running: float | None = None
    """Requests the run's servers say they run (their /metrics, summed; None: not known)."""
    server_queued: float | None = None
    """Requests the same servers say they queue."""
    countdown_s: float | None = None
    where: str = ""
    """Who writes: "pid 4242 on gpu-box" for an in-process run."""
    servers: int = 0
    servers_down: int = 0
    filter: str = ""
    cost: float | None = None
    """Dollars spent, where the API reports or config prices it."""
    cost_per_hour: float | None = None
    hosts: tuple[tuple[str, str], ...] = ()
    """(name, connection state) of each watched host: "connected", "disconnected: ...", ..."""
    readonly: bool = False
    """Opened with --readonly: k, r, s and p are off (said next to the state)."""
    note: str = ""
    """Said for good, before the figures: budgets the demo scaled down to fit the machine."""


def state_text(view: HeaderView) -> str:
    if view.countdown_s is not None and view.state in ("stopping", "quitting"):
        return f"{view.state}: drain {max(0, int(view.countdown_s + 0.999))}s"
    return view.state


def header_parts(view: HeaderView) -> list[str]:
    """The figures after the state, in priority order (the first ones survive a narrow screen).

    A host's state quotes its SSH or survey failure: one line, control characters visible.
    """
    parts = []
    for name, state in view.hosts:
        if state != "connected":
            parts.append(one_line(f"{name}: {state}"))
    if view.servers_down:
        parts.append(f"{view.servers_down}/{view.servers} server(s) unreachable")
    if view.note:
        parts.append(one_line(view.note))
    parts += [
        f"{format_count(view.tokens)} tok",
        f"{format_count(view.tok_s)} tok/s",
        f"done {view.done}/{view.total}",
    ]
    if view.cost is not None:
        spend = f"{format_dollars(view.cost)}"
        if view.cost_per_hour:
            spend += f" ({format_dollars(view.cost_per_hour)}/h)"
        parts.append(spend)
    if view.concurrency:
        parts += in_flight_parts(view)
    if view.filter:
        parts.append(one_line(f"filter: {view.filter}"))
    if view.where:
        parts.append(one_line(view.where))
    parts += [one_line(f"{name} ✓") for name, state in view.hosts if state == "connected"]
    return parts


def in_flight_parts(view: HeaderView) -> list[str]:
    """What the run has asked and not had answered yet, then what its servers say of it.

    The two counts differ, and must not seem to disagree (issue 31, point 7): a request
    sent is "in flight" until its answer is read, while a server's `run` counts only those
    it decodes and `q` those it holds in its queue. What the client counts and the servers
    do not is said as such: requests "in transit" (sent, not admitted yet, or answered and
    not read yet); more at the servers than sent: other clients share them.
    """
    flight = f"in flight {view.inflight}/{view.concurrency}"
    if view.utilisation is not None:
        flight += f" {view.utilisation * 100:.0f}%"
    if view.server_running is None or view.server_queued is None:
        return [flight]
    running, queued = round(view.server_running), round(view.server_queued)
    said = f"server: {format_count(running)} run, {format_count(queued)} queued"
    gap = view.inflight - running - queued
    if gap > 0:
        said += f", {format_count(gap)} in transit"
    elif gap < 0:
        said += ", incl. other clients'"
    return [flight, f"({said})"]


class RunHeader(Widget):
    """`gen-tui  RUNNING  63.2M tok  512k tok/s  done 3/8  in flight 64/64 98%  pid 42 on host`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "header--title",
        *(f"header--{state}" for state in STATES),
    }

    view: reactive[HeaderView] = reactive(HeaderView)

    def render(self) -> Text:
        view = self.view
        width = self.size.width
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" gen-tui ", style=self.get_component_rich_style("header--title"))
        text.append(" ")
        state = f" {state_text(view).upper()} "
        style = self.get_component_rich_style(f"header--{view.state}")
        text.append(state, style=style)
        if view.readonly:
            text.append(" ")
            text.append(" READ-ONLY ", style=self.get_component_rich_style("header--paused"))
        used = len(text)
        troubled = sum(1 for _, state in view.hosts if state != "connected")
        for index, part in enumerate(header_parts(view)):
            if index < troubled:
                # A host's problem must be seen: cut, never dropped, and to at most a third of
                # what is left so the figures still fit (the board, the events log and `l`
                # give it in full).
                room = max(12, (width - used - 2) // 3)
                if len(part) > room:
                    part = part[: room - 1] + "…"
            if used + 2 + len(part) > width:
                continue
            text.append("  " + part)
            used += 2 + len(part)
        return text
