"""The table view: one line per dataset (name, state, % done, tokens/budget, tok/s, ETA,
host), sortable, for fleets too many for panels (k9s and htop show theirs this way). With
more than one host shown, each host's datasets come under a line of its own: the host, its
link's state, its datasets by state, its tokens and tok/s (sorted within each host).

Drawn with Textual's Line API: each refresh turns the panel views into rows of plain text,
and only the lines whose text changed are redrawn; 64 datasets cost 64 short strings four
times a second, never a rebuilt widget tree. Names, hosts and states are someone else's
text: they are made one line and drawn as raw segments, never parsed as markup.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gen_tui.backends.figures import format_count
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.dataset_panel import (
    BADGE_KINDS,
    STATE_WIDTH,
    PanelView,
    badge_for,
    shown_eta,
    shown_rates,
    state_word,
)
from gen_tui.widgets.format import format_duration
from gen_tui.widgets.pieces import Line, Piece, PieceStyles

SORTS = ("config", "state", "% done", "ETA", "tok/s")
"""What `o` cycles through: the configured order, then the columns a fleet is read by."""

STATE_ORDER = {
    kind: rank
    for rank, kind in enumerate(
        [
            *("failed", "stale", "draining", "running", "paused", "queued", "idle"),
            *("stopped", "exhausted", "done"),
        ]
    )
}
"""Sorted by state, what needs a look comes first: failed and stale, then the live ones."""

PCT_WIDTH = 4
TOKENS_WIDTH = 13
RATE_WIDTH = 6
ETA_WIDTH = 6
MIN_HOST = 8
MAX_HOST = 30
MIN_NAME = 10
HEADER = 2
"""Lines the header keeps at the top wherever the rows scroll: what the table shows and
how it sorts (and the keys for both), then the column names."""


@dataclass(frozen=True)
class Row:
    """One dataset's line, as text, and what it sorts by."""

    name: str
    state: str
    kind: str
    pct: str
    tokens: str
    rate: str
    eta: str
    host: str
    done: float
    """Fraction of the token budget; -1 without one (sorts last)."""
    tok_s: float
    eta_s: float
    """Seconds left; infinity where there is no estimate (sorts last)."""
    where: str = ""
    """Its host's group: the link watching it, else its snapshot's host; "" for this
    process's runs."""
    written: int = 0
    """Tokens written, for its host's total."""


def row_for(name: str, view: PanelView | None, host: str | None = None) -> Row:
    """What a dataset's line says, from the same view its panel shows. `host`: the group
    it goes in (the link watching it; "" for a run of this process); None: its snapshot's
    host."""
    view = view or PanelView()
    _, kind = badge_for(view)
    state = state_word(view)  # the badge's own words: "budget reached", never "done"
    snap = view.snapshot
    if snap is None:
        where = one_line(host or "")
        return Row(one_line(name), state, kind, "", "-", "", "-", "", -1.0, 0.0, math.inf, where)
    done = min(1.0, snap.tokens / snap.max_tokens) if snap.max_tokens else -1.0
    pct = f"{math.floor(done * 100)}%" if done >= 0 else ""  # 100% only once there
    budget = format_count(snap.max_tokens) if snap.max_tokens is not None else "-"
    tok_s = shown_rates(view)[0]
    eta_s = shown_eta(view)  # the grid's own rule (one function for both views)
    return Row(
        one_line(name),
        state,
        kind,
        pct,
        f"{format_count(snap.tokens)}/{budget}",
        format_count(float(f"{tok_s:.3g}")),
        format_duration(eta_s),
        one_line(f"{snap.host}:{snap.pid}"),
        done,
        tok_s,
        eta_s if eta_s is not None and math.isfinite(eta_s) else math.inf,
        one_line(snap.host if host is None else host),
        snap.tokens,
    )


def sort_rows(rows: Sequence[Row], sort: str) -> list[Row]:
    """`rows` in the order `sort` (one of SORTS) asks; ties keep the configured order."""
    keys: dict[str, Callable[[Row], float]] = {
        "state": lambda row: STATE_ORDER.get(row.kind, len(STATE_ORDER)),
        "% done": lambda row: -row.done,
        "ETA": lambda row: row.eta_s,
        "tok/s": lambda row: -row.tok_s,
    }
    key = keys.get(sort)
    return list(rows) if key is None else sorted(rows, key=key)


def by_host(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    """`rows` grouped by host, hosts in the order their first row comes, each group in the
    rows' order; one group of every row when they are all one host's."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.where, []).append(row)
    return list(groups.items())


def host_text(host: str, rows: Sequence[Row], state: str | None) -> str:
    """A host's line: its name, its link's state, its datasets by state, its totals, e.g.
    `gpu-a · connected · 3 datasets: 2 running, 1 stale · 1.5M tokens · 40k tok/s`."""
    kinds: dict[str, int] = {}
    for row in rows:
        kinds[row.kind] = kinds.get(row.kind, 0) + 1
    order = sorted(kinds, key=lambda kind: STATE_ORDER.get(kind, len(STATE_ORDER)))
    noun = "dataset" if len(rows) == 1 else "datasets"
    parts = [host or "this process"]
    if state:
        parts.append(one_line(state, 60))
    parts.append(f"{len(rows)} {noun}: " + ", ".join(f"{kinds[k]} {k}" for k in order))
    parts.append(f"{format_count(sum(row.written for row in rows))} tokens")
    rate = sum(row.tok_s for row in rows)
    parts.append(f"{format_count(float(f'{rate:.3g}'))} tok/s")
    return " · ".join(parts)


def _cell(text: str, width: int, right: bool = False) -> str:
    if cell_len(text) > width:
        return set_cell_size(text[: max(0, width - 1)], width - 1) + "…" if width else ""
    pad = " " * (width - cell_len(text))
    return pad + text if right else text + pad


class DatasetTable(ScrollView, can_focus=True):
    """One line per dataset under a fixed header that names the sort; the cursor row is
    the selection (`k`, `r`, `v`... act on it), kept by name while rows re-sort."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Last", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "table--header",
        "table--host",
        "table--cursor",
        "table--muted",
        *(f"table--badge-{kind}" for kind in BADGE_KINDS),
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sort = SORTS[0]
        self.rows: list[Row] = []
        """The rows as shown: filtered and sorted."""
        self._given: list[Row] = []
        self.hosts: Mapping[str, str] = {}
        """Each watched host's link state, for its line (a host without one shows none)."""
        self._body: list[Row | str] = []
        """The lines under the header: a dataset's row, or the name of the host whose line
        it is (only with more than one host)."""
        self.selected: str | None = None
        """The selected dataset's name: it survives a filter that hides it for a while."""
        self._lines: list[Line | None] = []
        """Each line of the table as last made; None: not made since it went out of sight."""
        self._strips: dict[int, Strip] = {}
        self._styles = PieceStyles(self, "table")
        self._width = 0
        self._longest = 0
        """The longest name's cells: the name column is that wide (within its bounds)."""

    # what it shows

    def show(self, rows: Sequence[Row], hosts: Mapping[str, str] | None = None) -> None:
        """New rows (already filtered), sorted here, under their hosts' lines when more
        than one host shows (`hosts`: each one's link state); only the lines that changed
        redraw."""
        self._given = list(rows)
        self._longest = max((cell_len(row.name) for row in self._given), default=0)
        if hosts is not None:
            self.hosts = hosts
        groups = by_host(sort_rows(rows, self.sort))
        self.rows = [row for _host, group in groups for row in group]
        self._body = list(self.rows)
        if len({host for host, _group in groups if host}) > 1:  # this process's: not a host
            self._body = []
            for host, group in groups:
                self._body += [host, *group]
        self._redraw()

    @property
    def host_lines(self) -> int:
        """The lines the hosts take (0 with one host): the table is that much taller."""
        return len(self._body) - len(self.rows)

    def cycle_sort(self) -> str:
        """`o`: the next sort; returns its name."""
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.show(self._given)  # as given: "config" is their order (within each host)
        self.scroll_to_cursor()
        return self.sort

    def current(self) -> str | None:
        """The selected dataset's name if it shows, else the first row's (None: no rows)."""
        names = [row.name for row in self.rows]
        if self.selected in names:
            return self.selected
        return names[0] if names else None

    def select(self, name: str | None) -> None:
        self.selected = name
        self._redraw()
        self.scroll_to_cursor()

    def move(self, dy: int) -> None:
        """↑ ↓ (and pages): the cursor moves within the rows, and stays in sight."""
        if not self.rows:
            return
        names = [row.name for row in self.rows]
        current = self.current()
        index = names.index(current) if current in names else 0
        self.select(names[max(0, min(len(names) - 1, index + dy))])

    def action_page(self, direction: int) -> None:
        self.move(direction * max(1, self.size.height - 2))

    def action_edge(self, end: int) -> None:
        if self.rows:
            self.select(self.rows[-1 if end else 0].name)

    def scroll_to_cursor(self) -> None:
        current = self.current()
        lines = [line.name if isinstance(line, Row) else None for line in self._body]
        if current is None or current not in lines:
            return
        index = lines.index(current)
        if index == 1 and lines[0] is None:
            index = 0  # the first host's line stays in sight with its first row
        room = max(1, self.size.height - HEADER)
        top = round(self.scroll_offset.y)
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + room:
            self.scroll_to(y=index - room + 1, animate=False)

    def on_click(self, event: events.Click) -> None:
        index = event.y - HEADER + round(self.scroll_offset.y)
        if event.y >= HEADER and 0 <= index < len(self._body):
            line = self._body[index]
            if isinstance(line, Row):
                self.select(line.name)

    # drawing

    def _columns(self, width: int) -> tuple[int, int]:
        """(name, host) widths at `width`; the fixed columns take the rest."""
        fixed = STATE_WIDTH + PCT_WIDTH + TOKENS_WIDTH + RATE_WIDTH + ETA_WIDTH + 7
        free = max(MIN_NAME + MIN_HOST, width - fixed)
        host = max(MIN_HOST, min(MAX_HOST, free * 2 // 5))
        # As wide as the longest name (and its space), no wider: at 160 columns the rest
        # went to the name, ~80 cells, and pushed the figures far right of short names.
        name = min(free - host, max(MIN_NAME, self._longest + 1))
        return name, free - name

    def title_line(self, width: int) -> Line:
        count = len(self.rows)
        noun = "dataset" if count == 1 else "datasets"
        hosts = f" on {self.host_lines} hosts" if self.host_lines else ""
        title = f" {count} {noun}{hosts} · sort: {self.sort} (o) · t: grid"
        return ((_cell(title, width), ("header",)),)

    def host_line(self, host: str, width: int) -> tuple[Piece, ...]:
        group = [row for row in self.rows if row.where == host]
        text = host_text(host, group, self.hosts.get(host))
        return ((_cell(f" {text}", width), ("host",)),)

    def header_line(self, width: int) -> Line:
        name_w, host_w = self._columns(width)
        mark = {s: (s + ("↑" if s == "ETA" else "↓") if s == self.sort else s) for s in SORTS}
        text = " ".join(
            (
                "",
                _cell("name", name_w - 1),
                _cell(mark["state"], STATE_WIDTH),
                _cell(mark["% done"].replace("% done", "%"), PCT_WIDTH, right=True),
                _cell("tokens/budget", TOKENS_WIDTH, right=True),
                _cell(mark["tok/s"], RATE_WIDTH, right=True),
                _cell(mark["ETA"], ETA_WIDTH, right=True),
                _cell("host", host_w),
            )
        )
        return ((text, ("muted",)),)

    def row_line(self, row: Row, width: int, cursor: bool) -> Line:
        name_w, host_w = self._columns(width)
        base: tuple[str, ...] = ("cursor",) if cursor else ()
        return (
            (" " + _cell(row.name, name_w - 1) + " ", base),
            (_cell(row.state, STATE_WIDTH), (f"badge-{row.kind}", *base)),
            (" " + _cell(row.pct, PCT_WIDTH, right=True), base),
            (" " + _cell(row.tokens, TOKENS_WIDTH, right=True), base),
            (" " + _cell(row.rate, RATE_WIDTH, right=True), base),
            (" " + _cell(row.eta, ETA_WIDTH, right=True), base),
            (" " + _cell(row.host, host_w), base or ("muted",)),
        )

    def _line(self, index: int, width: int, current: str | None) -> Line:
        """Line `index` of the whole table: the title, the column names, then the body."""
        if index == 0:
            return self.title_line(width)
        if index == 1:
            return self.header_line(width)
        line = self._body[index - HEADER]
        if isinstance(line, Row):
            return self.row_line(line, width, line.name == current)
        return self.host_line(line, width)

    def _redraw(self) -> None:
        """Make the lines in sight again and repaint those that changed; a line out of sight
        is dropped, and made when it scrolls into sight (`render_line`): over 64 datasets at
        80x24, 19 rows of 64 made four times a second, not all of them."""
        width = self.scrollable_content_region.width
        count = HEADER + len(self._body)
        if width != self._width or count != len(self._lines):
            self._width, self._lines, self._strips = width, [None] * count, {}
            self.virtual_size = Size(width, count)
            self.refresh()
            return
        top = round(self.scroll_offset.y)
        sight = range(HEADER + top, min(count, self.size.height + top))
        current = self.current()
        changed = []
        for y in [*range(HEADER), *sight]:
            line = self._line(y, width, current)
            if line != self._lines[y]:
                self._lines[y] = line
                self._strips.pop(y, None)
                changed.append(Region(0, y if y < HEADER else y - top, width, 1))
        for y in range(HEADER, count):
            if y not in sight and self._lines[y] is not None:
                self._lines[y] = None
                self._strips.pop(y, None)
        if changed:
            self.refresh(*changed)  # one dirty mark for them all

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._strips.clear()
        super().notify_style_update()

    def on_focus(self) -> None:
        self.notify_style_update()  # the cursor row's colour says whether keys go here
        self.refresh()

    def on_blur(self) -> None:
        self.notify_style_update()
        self.refresh()

    def on_resize(self) -> None:
        self._redraw()

    def render_line(self, y: int) -> Strip:
        """The header's lines stay at the top wherever the table scrolled; line y below them
        is the row at y - HEADER past the scroll offset."""
        width = self.scrollable_content_region.width
        if width != self._width:
            self._width, self._strips = width, {}
            self._lines = [None] * (HEADER + len(self._body))
        index = y if y < HEADER else y + round(self.scroll_offset.y)
        if index >= len(self._lines):
            return Strip.blank(width, self._styles.style(()))
        strip = self._strips.get(index)
        if strip is None:
            line = self._lines[index]
            if line is None:  # out of sight when the rows last changed
                line = self._lines[index] = self._line(index, width, self.current())
            strip = self._styles.strip(line, width)
            self._strips[index] = strip
        return strip
