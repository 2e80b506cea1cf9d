"""One dataset's panel: name, state badge, token and sample bars, throughput, ETA, details.

The panel knows nothing of engines, processes or SSH: it is handed a :class:`PanelView`
(a :class:`DatasetSnapshot` plus what the app concluded about it: stale, draining countdown,
outcome) and shows it, touching only the parts that changed since the last view.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Label, Sparkline

from gen_tui.app.headless import cost_text, format_duration
from gen_tui.backends.counts import format_count
from gen_tui.backends.snapshot import DatasetSnapshot, DatasetState
from gen_tui.widgets.meter import Meter
from gen_tui.widgets.readout import Readout

HISTORY_POINTS = 60
"""Points of tok/s history kept for the sparkline (one per second of snapshot time)."""


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


_BADGES: dict[DatasetState, tuple[str, str]] = {
    DatasetState.LOADING: ("queued", "queued"),
    DatasetState.WAITING: ("queued", "queued"),
    DatasetState.ACTIVE: ("running", "running"),
    DatasetState.PAUSED: ("paused", "paused"),
    DatasetState.DRAINING: ("draining", "draining"),
    DatasetState.DONE: ("budget reached", "done"),
    DatasetState.EXHAUSTED: ("exhausted", "exhausted"),
    DatasetState.STOPPED: ("stopped", "stopped"),
    DatasetState.FAILED: ("failed", "failed"),
}
BADGE_KINDS = ("idle", "stale", *sorted({kind for _, kind in _BADGES.values()}))


def badge_for(view: PanelView) -> tuple[str, str]:
    """(text, kind) of the state badge; kind selects its colour in tui.tcss (`-badge-KIND`)."""
    snap = view.snapshot
    if view.failure is not None:
        return "failed", "failed"
    if snap is None:
        return view.pending, "idle"
    if view.stale and not snap.state.finished:
        return "stale · press k", "stale"
    text, kind = _BADGES[snap.state]
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
    return f"{counted} smp{mean}"


def rate_label(snap: DatasetSnapshot) -> str:
    """`161k tok/s 42.5 req/s`: three significant digits are plenty for a rate.

    A finished dataset writes nothing, whatever the engine's trailing window still says.
    """
    if snap.state.finished:
        return "0 tok/s 0.0 req/s"
    return f"{format_count(float(f'{snap.tok_s:.3g}'))} tok/s {snap.samples_s:.1f} req/s"


def detail_parts(view: PanelView) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(first line, second line) of the details, each in priority order."""
    snap = view.snapshot
    if snap is None:
        return ((view.failure or "",), ())
    first: list[str] = []
    if not snap.state.finished:
        first.append(f"ETA {format_duration(snap.eta_s)}")
    first.append(f"{snap.inflight} in flight")
    first.append(f"{snap.errors} err")
    if snap.cost is not None:
        first.append(cost_text(snap))
    if snap.malformed:
        first.append(f"{snap.malformed} bad lines")
    second = [f"{snap.host}:{snap.pid}"]
    if view.stale and view.stale_reason:
        second.append(view.stale_reason)
    elif snap.message:
        second.append(snap.message)
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


class Details(Widget):
    """Secondary figures, laid out to fit: one line (compact) or two (roomy)."""

    first: reactive[tuple[str, ...]] = reactive(())
    second: reactive[tuple[str, ...]] = reactive(())

    def render(self) -> Text:
        width = self.size.width
        if self.size.height >= 2:
            lines = [fit(self.first, width), fit(self.second, width)]
        else:
            lines = [fit(self.first + self.second, width)]
        return Text("\n".join(lines), no_wrap=True, overflow="ellipsis")


class DatasetPanel(Vertical, can_focus=True):
    """The live panel of one dataset."""

    def __init__(self, dataset: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="-badge-idle")
        self.dataset = dataset
        self.view: PanelView | None = None
        self._history: deque[float] = deque(maxlen=HISTORY_POINTS)
        self._mark: tuple[float, int] | None = None
        self._shown: dict[str, object] = {}
        self._badge_kind = "idle"
        self._ready = False
        self._rendered: PanelView | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(classes="panel-title"):
            yield Label(self.dataset, id="name", markup=False)
            yield Label("", id="badge", markup=False)
        yield Meter(id="tokens")
        yield Meter(id="samples")
        with Horizontal(classes="panel-rates"):
            yield Readout(id="rates")
            yield Sparkline([], id="spark")
        yield Details(id="details")

    def on_mount(self) -> None:
        self._ready = True
        self.show(self.view or PanelView(), force=True)

    @property
    def history(self) -> tuple[float, ...]:
        return tuple(self._history)

    def _record(self, snap: DatasetSnapshot | None) -> bool:
        """Fold a snapshot into the per-second tok/s history; True if a point was added."""
        if snap is None:
            return False
        if self._mark is None or snap.tokens < self._mark[1] or snap.updated_at < self._mark[0]:
            self._mark = (snap.updated_at, snap.tokens)
            return False
        since, tokens = self._mark
        elapsed = snap.updated_at - since
        if elapsed < 1.0:
            return False
        self._history.append((snap.tokens - tokens) / elapsed)
        self._mark = (snap.updated_at, snap.tokens)
        return True

    def _changed(self, key: str, value: object) -> bool:
        if self._shown.get(key, self) == value:
            return False
        self._shown[key] = value
        return True

    def show(self, view: PanelView, *, force: bool = False) -> None:
        """Display `view`; parts whose content is unchanged are not touched."""
        self.view = view
        if not self._ready or (view == self._rendered and not force):
            return
        previous, self._rendered = self._rendered, view
        snap = view.snapshot
        grew = (previous is None or previous.snapshot is not snap) and self._record(snap)
        text, kind = badge_for(view)
        if self._changed("badge", text):
            self.query_one("#badge", Label).update(text)
        if kind != self._badge_kind:
            if self._badge_kind:
                self.remove_class(f"-badge-{self._badge_kind}")
            self.add_class(f"-badge-{kind}")
            self._badge_kind = kind
        tokens = self.query_one("#tokens", Meter)
        samples = self.query_one("#samples", Meter)
        if snap is None:
            tokens.fraction, tokens.label = None, "-"
            samples.fraction, samples.label = None, ""
            rates = ""
        else:
            tokens.fraction = min(1.0, snap.tokens / snap.max_tokens) if snap.max_tokens else None
            tokens.label = token_label(snap)
            samples.fraction = (
                min(1.0, snap.samples / snap.max_samples) if snap.max_samples else None
            )
            samples.label = sample_label(snap)
            rates = rate_label(snap)
        self.query_one("#rates", Readout).text = rates
        if grew or force:
            # Zero-padded on the left to a fixed length: the chart fills in from the right
            # and its floor is 0 tok/s (a Sparkline scales from its smallest value).
            padding = [0.0] * (HISTORY_POINTS + 1 - len(self._history))
            self.query_one("#spark", Sparkline).data = padding + list(self._history)
        first, second = detail_parts(view)
        details = self.query_one("#details", Details)
        details.first, details.second = first, second
