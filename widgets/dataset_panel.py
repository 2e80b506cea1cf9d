"""One dataset's panel: name, state badge, token and sample bars, throughput, ETA, details.

The panel knows nothing of engines, processes or SSH: it is handed a :class:`PanelView`
(a :class:`DatasetSnapshot` plus what the app concluded about it: stale, draining countdown,
outcome) and shows it, touching only the parts that changed since the last view.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gen_tui.backends.budget.rules import runs_out_at
from gen_tui.backends.figures import format_count
from gen_tui.backends.progress import truncation
from gen_tui.backends.progress.batches import BATCH_COUNTS_SAID, batches_eta, batches_line
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState
from gen_tui.backends.untrusted import one_line
from gen_tui.widgets.format import STATE_BADGES, cost_text, format_duration, lanes_text
from gen_tui.widgets.pieces import Line, PieceStyles

HISTORY_POINTS = 240
"""Points of tok/s history kept for the sparkline (one per second of snapshot time): as
many as the widest chart (a panel alone on a 240-column terminal) shows."""
WIDE_PANEL = 76
"""From this width on, the figures keep LEFT_WIDTH columns and the chart takes the rest,
beside them and as tall as the panel (bars stretched across 150 columns read no better,
while the chart gains from every column)."""
LEFT_WIDTH = 46
COMPACT = 5
"""A panel this short or shorter has one line of details."""
SHORT_ROWS = 4
"""A panel this short (many datasets on a small terminal) has no samples bar."""
TINY_ROWS = 3
"""A panel this short (nine datasets at 80x24 under the server and GPU lines) has its
title, its token bar and one line of figures."""


@dataclass(frozen=True)
class PanelView:
    """Everything a panel shows. Two equal views render identically."""

    snapshot: DatasetSnapshot | None = None
    stale: bool = False
    stale_reason: str = ""
    countdown_s: float | None = None
    """Seconds left of a drain, while the run that writes this dataset stops."""
    outcome: str | None = None
    """How the run ended, when it did not simply finish: "stopped" or "aborted"."""
    failure: str | None = None
    """Why the run failed before this dataset could report, if it did."""
    pending: str = "idle"
    """The badge before the first snapshot: "idle" (nothing running) or "starting"."""


BADGE_KINDS = ("idle", "stale", *sorted({kind for _, kind in STATE_BADGES.values()}))


STALE_HINT = " · press k"
"""What the grid's stale badge adds to its word: the key that deals with it."""
STATE_WIDTH = max(len("draining 999s"), *(len(text) for text, _ in STATE_BADGES.values()))
"""Cells the longest state word takes ("budget reached"): a view narrower than that cut it
to its kind, and the table said "done" where the badge said "budget reached" (issue 31)."""


def state_word(view: PanelView) -> str:
    """The badge's words for the state, without the key it hints at: what every view says
    of it (the grid's badge, the table's state column), from the one table `STATE_BADGES`."""
    text, _ = badge_for(view)
    return text.removesuffix(STALE_HINT)


def badge_for(view: PanelView) -> tuple[str, str]:
    """(text, kind) of the state badge; kind selects its colour in tui.tcss (`-badge-KIND`)."""
    snap = view.snapshot
    if view.failure is not None:
        return "failed", "failed"
    if snap is None:
        return view.pending, "idle"
    if view.stale and not snap.state.finished:
        return f"stale{STALE_HINT}", "stale"
    text, kind = STATE_BADGES[snap.state]
    if view.countdown_s is not None and not snap.state.finished:
        return f"draining {max(0, int(view.countdown_s + 0.999))}s", "draining"
    if snap.state is DatasetState.STOPPED and view.outcome:
        return view.outcome, kind
    return text, kind


def token_label(snap: DatasetSnapshot) -> str:
    tokens = format_count(snap.tokens)
    if snap.max_tokens is None:
        return f"{tokens} tok, no budget"
    return f"{tokens} / {format_count(snap.max_tokens)}"


def sample_label(snap: DatasetSnapshot) -> str:
    samples = format_count(snap.samples)
    counted = f"{samples} / {format_count(snap.max_samples)}" if snap.max_samples else samples
    mean = f" · avg {format_count(round(snap.mean_tokens))}" if snap.mean_tokens else ""
    if snap.conversations is not None:  # --turns all: a record is a turn
        return f"{counted} turns · {format_count(snap.conversations)} conv{mean}"
    return f"{counted} smp{mean}"


ARRIVING_S = 10.0
"""A draining dataset whose last record is older than this has nothing arriving: its
trailing window's rate is what it did, not what it does."""


def producing(view: PanelView) -> bool:
    """Whether the dataset produces now, the one rule for every view (grid, table, header).

    Not when it has ended (stopped, killed, budget reached, failed), is paused, or drains
    (its run stopping: the engine's draining state or a `k` countdown) with no record in
    the last ARRIVING_S. A trailing window decays for a minute after the last record:
    shown, it read `IDLE 58.83M tok 19 tok/s` beside a run being killed (issue 31)."""
    snap = view.snapshot
    if snap is None or snap.state.finished or view.failure is not None:
        return False
    if snap.state is DatasetState.PAUSED:
        return False  # "paused: nothing sent", whatever its last answers still bring
    if stopping(view):
        last = snap.last_record_at
        return last is not None and snap.updated_at - last <= ARRIVING_S
    return True


def stopping(view: PanelView) -> bool:
    """Its run is stopping: the engine's draining state, or a `k` countdown."""
    snap = view.snapshot
    draining = snap is not None and snap.state is DatasetState.DRAINING
    return draining or view.countdown_s is not None


def shown_rates(view: PanelView) -> tuple[float, float]:
    """(tok/s, samples/s) as every view says them: 0 for a dataset not producing."""
    snap = view.snapshot
    if snap is None or not producing(view) or not math.isfinite(snap.tok_s):
        return 0.0, 0.0
    return snap.tok_s, snap.samples_s


def shown_eta(view: PanelView) -> float | None:
    """The ETA every view says: only for a dataset that produces and goes on (not
    draining: a run stopping reaches no budget); a batch run's is its batches'."""
    snap = view.snapshot
    if snap is None or not producing(view) or stopping(view):
        return None
    if snap.batches:
        return batches_eta(snap.batches, snap.updated_at)
    return snap.eta_s


def rate_label(view: PanelView) -> str:
    """`161k tok/s 42.5 req/s`: three significant digits are plenty for a rate.

    A dataset not producing (:func:`producing`) shows 0, whatever the engine's trailing
    window still says; a paused one sends nothing new.
    """
    snap = view.snapshot
    if snap is not None and snap.state is DatasetState.PAUSED:
        return "paused: nothing sent"
    tok_s, samples_s = shown_rates(view)
    return f"{format_count(float(f'{tok_s:.3g}'))} tok/s {samples_s:.1f} req/s"


def fit_rate(view: PanelView, width: int) -> str:
    """`rate_label` in `width` cells: whole if it fits, else req/s's decimal goes first
    (`103.6 req/s` -> `104 req/s`), then req/s; what still does not fit ends in "…" (a cut
    figure never reads as a whole one: `103.6 req/` was one)."""
    if view.snapshot is None or width <= 0:
        return ""
    full = rate_label(view)
    if len(full) <= width:
        return full
    tokens = full.partition(" tok/s")[0]
    samples_s = shown_rates(view)[1]
    if full.endswith(" req/s") and tokens != full:
        for shorter in (f"{tokens} tok/s {samples_s:.0f} req/s", f"{tokens} tok/s"):
            if len(shorter) <= width:
                return shorter
    return full[: width - 1] + "…"


def truncation_piece(snap: DatasetSnapshot) -> tuple[str, tuple[str, ...]] | None:
    """`12% cut` (answers cut at max_new_tokens), highlighted past the writer's warning
    share; None while no answer is cut."""
    text = truncation.label(snap.truncated, snap.truncated_of)
    if not text:
        return None
    over = truncation.over(snap.truncated, snap.truncated_of, snap.truncated_warn)
    return f" {text} ", ("truncated-over",) if over else ("truncated",)


def detail_parts(view: PanelView) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(first line, second line) of the details, each in priority order.

    The host, the message (progress.json) and a failure are someone else's text, and the
    panel writes its lines as raw segments: each is one line, its control characters made
    visible, before it is drawn.
    """
    snap = view.snapshot
    if snap is None:
        return ((one_line(view.failure or ""),), ())
    first: list[str] = []
    end = runs_out_at(snap.tokens, snap.max_tokens, snap.prompts_left, snap.mean_tokens)
    eta = shown_eta(view)
    if end is not None and not snap.state.finished:
        # No ETA toward a budget the prompts cannot reach: the time is to where they run
        # out (issue 31, point 19), the only end the run will see.
        piece = f"prompts run out ~{format_count(end)}"
        tok_s = shown_rates(view)[0]
        if eta is not None and tok_s > 0:
            piece += f" in {format_duration(max(0, end - snap.tokens) / tok_s)}"
        first.append(piece)
    elif producing(view) and not stopping(view) and not snap.batches:  # batches': below
        first.append(f"ETA {format_duration(eta)}")
    first.append(f"{snap.inflight} in flight")
    first.append(f"{snap.errors} err")
    if snap.cost is not None:
        first.append(cost_text(snap))
    if snap.malformed:
        first.append(f"{snap.malformed} bad lines")
    second = [one_line(f"{snap.host}:{snap.pid}")]
    if snap.lanes:
        second.append(f"lanes {lanes_text(snap)}")
    if snap.batches and not snap.state.finished:
        # The batch lane's: its own line of the details, first, since it is what the
        # dataset waits for (hours, at the provider's pace).
        second.insert(0, batches_line(snap.batches, snap.updated_at))
    if view.stale and view.stale_reason:
        second.append(one_line(view.stale_reason))
    elif snap.message and not (snap.batches and snap.message.endswith(BATCH_COUNTS_SAID)):
        second.append(one_line(snap.message))  # (the lane's counts: the batches line has them)
    if snap.budget_note and not snap.state.finished:
        second.append(one_line(snap.budget_note))
    if snap.resumed_tokens:
        second.append(f"resumed at {format_count(snap.resumed_tokens)}")
    return tuple(first), tuple(second)


def fit(parts: Sequence[str], width: int, sep: str = "  ") -> str:
    """The parts, in order, that fit in `width` cells; a part that does not fit is left out."""
    line = ""
    for part in parts:
        if not part:
            continue
        candidate = f"{line}{sep}{part}" if line else part
        if len(candidate) <= width:
            line = candidate
    return line


SPARK = " ▁▂▃▄▅▆▇█"


def spark_rows(values: Sequence[float], width: int, height: int) -> list[str]:
    """A bar chart of the last `width` values in `height` rows of eighth blocks, top first.

    The floor is zero and the top the largest value shown, so a stalled writer reads as an
    empty chart (a chart scaled from its own minimum would show noise as mountains)."""
    points = list(values)[-width:] if width > 0 else []
    points = [0.0] * (width - len(points)) + points
    top = max(points, default=0.0)
    rows = []
    for row in range(height - 1, -1, -1):
        line = []
        for value in points:
            eighths = round(value / top * height * 8) if top > 0 else 0
            if value > 0 and eighths == 0:
                eighths = 1
            line.append(SPARK[min(8, max(0, eighths - row * 8))])
        rows.append("".join(line))
    return rows


class DatasetPanel(Widget, can_focus=True):
    """The live panel of one dataset, drawn as one widget, line by line.

    One widget rather than a title, two bars, a rate line, a chart and details: the panels
    change four times a second, and Textual's cost is per widget redrawn. Each line is
    described as plain data (text and style names) and turned into a Strip only when it
    differs from what is on screen, and only the lines that changed are refreshed: a new
    count moves two or three lines of nine, and the chart moves once a second. Colours come
    from component classes in tui.tcss.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "panel--title",
        "panel--title-focus",
        "panel--name",
        "panel--filled",
        "panel--filled-samples",
        "panel--filled-done",
        "panel--filled-stale",
        "panel--empty",
        "panel--spark",
        "panel--muted",
        "panel--truncated",
        "panel--truncated-over",
        *(f"panel--badge-{kind}" for kind in BADGE_KINDS),
    }

    def __init__(self, dataset: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="-badge-idle")
        self.dataset = dataset
        self.view: PanelView | None = None
        self._history: deque[float] = deque(maxlen=HISTORY_POINTS)
        self._mark: float | None = None
        """The snapshot time of the history's last point."""
        self._badge_kind = "idle"
        self._rendered: PanelView | None = None
        self._lines: list[Line] = []
        self._strips: list[Strip] = []
        self._drawn_for: tuple[int, int, bool] | None = None
        """(width, height, focused) the strips were made for; anything else redraws all."""
        self._styles = PieceStyles(self, "panel")

    @property
    def history(self) -> tuple[float, ...]:
        return tuple(self._history)

    def _record(self, view: PanelView) -> bool:
        """Fold a view into the per-second tok/s history; True if a point was added.

        A point is the rate the panel's line says (`shown_rates`), at most one a second of
        snapshot time: the tokens between two snapshots over the time between them made a
        record of ~4000 tokens landing in a 5 s gap a 800 tok/s peak beside a steady 50
        (the demo's B9, one slot at 50 tok/s)."""
        snap = view.snapshot
        if snap is None:
            return False
        if self._mark is None or snap.updated_at < self._mark:  # the first, or a new run's
            self._mark = snap.updated_at
            return False
        if snap.updated_at - self._mark < 1.0:
            return False
        self._history.append(shown_rates(view)[0])
        self._mark = snap.updated_at
        return True

    def show(self, view: PanelView, *, force: bool = False, draw: bool = True) -> None:
        """Display `view`; an unchanged view costs nothing, a changed one its changed lines.

        `draw` False (the table view hides the panels) keeps the view and the tok/s history
        and draws nothing: the panel draws itself whole when it shows again."""
        self.view = view
        if view == self._rendered and not force:
            return
        previous, self._rendered = self._rendered, view
        if previous is None or previous.snapshot is not view.snapshot:
            self._record(view)
        kind = badge_for(view)[1]
        if kind != self._badge_kind:  # the class only matters to tests and custom styles
            self.remove_class(f"-badge-{self._badge_kind}")
            self.add_class(f"-badge-{kind}")
            self._badge_kind = kind
        if not draw:
            self._drawn_for = None
            return
        if force or self._drawn_for != self._geometry():
            self.refresh()
            return
        width = self.size.width
        for y, line in enumerate(self.lines()):
            if line != self._lines[y]:
                self._lines[y] = line
                self._strips[y] = self._styles.strip(line, width)
                self.refresh(Region(0, y, width, 1))

    def _geometry(self) -> tuple[int, int, bool]:
        return self.size.width, self.size.height, self.has_focus

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._drawn_for = None
        super().notify_style_update()

    def on_focus(self) -> None:
        self._drawn_for = None
        self.refresh()

    def on_blur(self) -> None:
        self._drawn_for = None
        self.refresh()

    def render_line(self, y: int) -> Strip:
        geometry = self._geometry()
        if geometry != self._drawn_for:
            self._drawn_for = geometry
            self._lines = self.lines()
            self._strips = [self._styles.strip(line, geometry[0]) for line in self._lines]
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self._styles.style(()))

    @staticmethod
    def _bar(fraction: float | None, label: str, width: int, fill: str) -> Line:
        inner = width - 2
        bar_width = inner - len(label) - 1
        if fraction is None or bar_width < 4:
            return ((" " + label[:inner].ljust(inner) + " ", ()),)
        fraction = min(1.0, max(0.0, fraction))
        filled = round(bar_width * fraction) or (1 if fraction > 0 else 0)
        return (
            (" ", ()),
            ("━" * filled, (fill,)),
            ("─" * (bar_width - filled), ("empty",)),
            (" " + label + " ", ()),
        )

    def lines(self) -> list[Line]:
        """What each line of the panel shows, as plain data, at the panel's current size.

        A wide panel keeps its bars and rate to LEFT_WIDTH columns and gives the chart the
        rest beside them; its details keep the whole width below."""
        width, height = self.size.width, self.size.height
        if width < WIDE_PANEL or height < 3:
            return self._lines_at(width, height, chart=True)
        figures = self._lines_at(width, height, chart=False, figures=LEFT_WIDTH)
        below = 1 if height <= COMPACT else 2
        details = self._lines_at(width, height, chart=False)[-below:]
        top = figures[1:-below]
        rows = spark_rows(self._history, width - LEFT_WIDTH - 2, max(1, height - 1 - below))
        merged = [figures[0]]
        for y, row in enumerate(rows):
            line = top[y] if y < len(top) else ()
            used = sum(len(text) for text, _ in line)
            pad = max(0, LEFT_WIDTH - used)
            merged.append((*line, (" " * pad + " ", ()), (row, ("spark",))))
        return merged + details

    def _lines_at(
        self, width: int, height: int, *, chart: bool, figures: int | None = None
    ) -> list[Line]:
        """The lines at `width`; without `chart`, the figures alone, `figures` wide (the
        title keeps the whole width)."""
        view = self.view or PanelView()
        snap = view.snapshot
        badge, kind = badge_for(view)
        title = "title-focus" if self.has_focus else "title"
        badge_text = f" {badge} "
        name_width = max(1, width - len(badge_text) - 1)
        name = one_line(self.dataset)[: name_width - 1].ljust(name_width - 1)
        lines: list[Line] = [
            ((" " + name, ("name", title)), (" ", (title,)), (badge_text, (title, f"badge-{kind}")))
        ]
        width = figures or width
        if snap is None:
            tokens, token_fraction, samples, sample_fraction, rates = "-", None, "", None, ""
        else:
            tokens = token_label(snap)
            token_fraction = min(1.0, snap.tokens / snap.max_tokens) if snap.max_tokens else None
            samples = sample_label(snap)
            sample_fraction = (
                min(1.0, snap.samples / snap.max_samples) if snap.max_samples else None
            )
            rates = rate_label(view)
        fill = {"done": "filled-done", "stale": "filled-stale"}.get(kind, "filled")
        lines.append(self._bar(token_fraction, tokens, width, fill))
        first, second = detail_parts(view)
        if height > SHORT_ROWS:
            lines.append(self._bar(sample_fraction, samples, width, "filled-samples"))
        elif samples:  # no row for the samples bar: its count leads the details
            first = (samples, *first)
        if height <= TINY_ROWS:
            lines.append(((" " + fit((rates, *first, *second), width - 2), ("muted",)),))
            return lines
        cut = truncation_piece(snap) if snap is not None else None
        cut_width = len(cut[0]) if cut is not None else 0
        if not chart:
            rates = fit_rate(view, width - 2)
            rate: Line = ((" " + rates, ()),)
            if cut is not None and len(rates) + 1 + cut_width <= width:
                rate += (cut,)
            lines.append(rate)
            if height <= 5:
                lines.append(((" " + fit(first + second, width - 2), ("muted",)),))
            else:
                lines.append(((" " + fit(first, width - 2), ("muted",)),))
                lines.append(((" " + fit(second, width - 2), ("muted",)),))
        elif height <= 5:
            rate_width = min(24, max(0, width - 10))
            spark_width = max(0, width - rate_width - 1 - cut_width)
            spark = spark_rows(self._history, spark_width, 1)[0]
            rate = ((" " + fit_rate(view, rate_width - 2).ljust(rate_width - 1), ()),)
            if cut is not None and spark_width:
                rate += (cut,)
            lines.append((*rate, (spark, ("spark",))))
            lines.append(((" " + fit(first + second, width - 2), ("muted",)),))
        else:
            chart_rows = max(1, height - 6)
            rates = fit_rate(view, width - 2)
            rate = ((" " + rates, ()),)
            if cut is not None and len(rates) + 1 + cut_width <= width:
                rate += (cut,)
            lines.append(rate)
            for row in spark_rows(self._history, max(0, width - 2), chart_rows):
                lines.append(((" ", ()), (row, ("spark",))))
            lines.append(((" " + fit(first, width - 2), ("muted",)),))
            lines.append(((" " + fit(second, width - 2), ("muted",)),))
        return lines
