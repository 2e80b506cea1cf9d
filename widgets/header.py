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


@dataclass(frozen=True)
class Part:
    """One figure of the header, with what it may become on a narrow screen.

    `steps`: (rank, shorter form) pairs, shortest last; "" drops the part. Across all the
    parts, the step of highest rank is taken first, so the least important figure gives
    way first (a pid before the servers' figures, those shortened before the demo's note is
    cut, and dropped only after), instead of whichever comes last on the line.
    """

    text: str
    steps: tuple[tuple[int, str], ...] = ()


# What gives way first on a narrow header, highest first (see Part).
DROP_HOST_OK = 90
SHORT_FIGURES = 85
DROP_WHERE = 80
SHORT_SERVERS = 70
SHORT_COST = 60
SHORT_FLIGHT = 55
CUT_NOTE = 50
DROP_SERVERS = 40
NOTE_ROOM = 12
"""The note's length once cut (with its "…"): its first words, enough to say what it is."""


def header_parts(view: HeaderView) -> list[str]:
    """The figures after the state, in priority order (the first ones survive a narrow screen).

    A host's state quotes its SSH or survey failure: one line, control characters visible.
    """
    return [part.text for part in parts_of(view)]


def parts_of(view: HeaderView) -> list[Part]:
    """:func:`header_parts` with each part's shorter forms."""
    parts = []
    for name, state in view.hosts:
        if state != "connected":
            parts.append(Part(one_line(f"{name}: {state}")))
    if view.servers_down:
        parts.append(Part(f"{view.servers_down}/{view.servers} server(s) unreachable"))
    if view.note:
        note = one_line(view.note)
        cut = note[: NOTE_ROOM - 1] + "…" if len(note) > NOTE_ROOM else note
        parts.append(Part(note, ((CUT_NOTE, cut),)))
    parts += [
        figure_part(view.tokens, "tok"),
        figure_part(view.tok_s, "tok/s"),
        Part(f"done {view.done}/{view.total}"),
    ]
    if view.cost is not None:
        spend = f"{format_dollars(view.cost)}"
        if view.cost_per_hour:
            full = f"{spend} ({format_dollars(view.cost_per_hour)}/h)"
            parts.append(Part(full, ((SHORT_COST, spend),)))
        else:
            parts.append(Part(spend))
    if view.concurrency:
        parts += in_flight_parts(view)
    if view.filter:
        parts.append(Part(one_line(f"filter: {view.filter}")))
    if view.where:
        parts.append(Part(one_line(view.where), ((DROP_WHERE, ""),)))
    parts += [
        Part(one_line(f"{name} ✓"), ((DROP_HOST_OK, ""),))
        for name, state in view.hosts
        if state == "connected"
    ]
    return parts


def figure_part(value: float, unit: str) -> Part:
    """A total with its unit, to three significant digits where room is short: the figures'
    width grows with the machine's speed (931.88k tok/s), and a decimal is what gives way
    first, before a pid, the servers' figures or the demo's note (both seen cut at 80 and 120
    columns on a fast machine)."""
    full = f"{format_count(value)} {unit}"
    short = f"{format_count(value, digits=3)} {unit}"
    return Part(full, ((SHORT_FIGURES, short),) if short != full else ())


def in_flight_parts(view: HeaderView) -> list[Part]:
    """What the run has asked and not had answered yet, then what its servers say of it.

    The two counts differ, and must not seem to disagree (issue 31, point 7): a request
    sent is "in flight" until its answer is read, while a server's `run` counts only those
    it decodes and `q` those it holds in its queue. What the client counts and the servers
    do not is said as such: requests "in transit" (sent, not admitted yet, or answered and
    not read yet); more at the servers than sent: other clients share them.
    """
    bare = f"in flight {view.inflight}/{view.concurrency}"
    flight = Part(bare)
    if view.utilisation is not None:
        flight = Part(f"{bare} {view.utilisation * 100:.0f}%", ((SHORT_FLIGHT, bare),))
    if view.server_running is None or view.server_queued is None:
        return [flight]
    running, queued = round(view.server_running), round(view.server_queued)
    run_s, queued_s = format_count(running), format_count(queued)
    said = f"server: {run_s} run, {queued_s} queued"
    short = f"srv {run_s} run · {queued_s} q"
    gap = view.inflight - running - queued
    if gap > 0:
        said += f", {format_count(gap)} in transit"
        short += f" · {format_count(gap)} transit"
    elif gap < 0:
        said += ", incl. other clients'"
        short += " · +others"
    steps = ((SHORT_SERVERS, f"({short})"), (DROP_SERVERS, ""))
    return [flight, Part(f"({said})", steps)]


def fit_parts(parts: list[Part], room: int) -> list[str]:
    """What the header draws of `parts` in `room` columns (two spaces before each).

    Shortened least important first (see Part) until they fit; then each shortening is
    undone, the most important first, where the longer form costs no part its place: a
    note cut for servers' figures that do not fit even so is said whole. What still does
    not fit is skipped, as it always was (a later, shorter part may take the room).
    """
    texts = [part.text for part in parts]

    def width() -> int:
        return sum(2 + len(text) for text in texts if text)

    steps = sorted(
        ((rank, index, form) for index, part in enumerate(parts) for rank, form in part.steps),
        key=lambda step: -step[0],
    )
    taken: list[tuple[int, str]] = []
    for _, index, form in steps:
        if width() <= room:
            break
        if len(form) < len(texts[index]):
            taken.append((index, texts[index]))
            texts[index] = form
    for index, longer in reversed(taken):
        before = drawn(texts, room)
        shorter, texts[index] = texts[index], longer
        if not before <= drawn(texts, room):
            texts[index] = shorter
    return [texts[index] for index in sorted(drawn(texts, room))]


def drawn(texts: list[str], room: int) -> set[int]:
    """The indices of `texts` drawn in `room` columns: each in turn when it fits (two
    spaces before it), else skipped; "" is no part."""
    shown, used = set(), 0
    for index, text in enumerate(texts):
        if text and used + 2 + len(text) <= room:
            shown.add(index)
            used += 2 + len(text)
    return shown


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
        parts = parts_of(view)
        troubled = sum(1 for _, state in view.hosts if state != "connected")
        for index in range(troubled):
            # A host's problem must be seen: cut, never dropped, and to at most a third of
            # what is left so the figures still fit (the board, the events log and `l`
            # give it in full).
            room = max(12, (width - used - 2) // 3)
            part = parts[index].text
            if len(part) > room:
                parts[index] = Part(part[: room - 1] + "…")
        for part in fit_parts(parts, width - used):
            if used + 2 + len(part) > width:
                continue
            text.append("  " + part)
            used += 2 + len(part)
        return text
