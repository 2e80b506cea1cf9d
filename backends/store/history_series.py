"""What the TUI's plot view draws of a dataset's history: its points, the time axis, a summary.

Why apart from the screen: the screen only draws; what a history holds (the end of the file,
fetched through the watcher on the run's machine, possibly cut), how its time is scaled and
what the line under the plots says are plain values that unit tests check without Textual.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from gen_tui.backends.axes import ticks_within
from gen_tui.backends.figures import format_count
from gen_tui.backends.store.history import HistoryPoint, parse_history_lines
from gen_tui.backends.store.tails import Tail
from gen_tui.backends.untrusted import one_line


@dataclass(frozen=True)
class DatasetHistory:
    """One dataset's points as the plot view holds them, or why there are none."""

    dataset: str
    points: tuple[HistoryPoint, ...] = ()
    partial: bool = False
    """Older points exist that were not fetched (the fetch is bounded)."""
    of: int = 0
    """How many points the file holds when those shown were picked across it (0: all)."""
    bad: int = 0
    problems: tuple[str, ...] = ()
    error: str | None = None

    @classmethod
    def of_tail(cls, dataset: str, tail: Tail) -> DatasetHistory:
        """The points in the end of a history file, read as `history.read_history` reads."""
        if tail.error:
            return cls(dataset, error=one_line(tail.error, 300))
        read = parse_history_lines(tail.lines, tail.path or dataset, numbers=tail.numbers)
        if tail.numbers:  # picked across the file: only a huge file's start is left out
            partial = tail.start > 0
        else:
            fetched = sum(len(line.encode("utf-8", "replace")) + 1 for line in tail.lines)
            partial = tail.size > fetched
        return cls(
            dataset,
            tuple(read.points),
            partial=partial,
            of=tail.total if tail.total > len(tail.lines) else 0,
            bad=read.bad,
            problems=tuple(one_line(problem, 300) for problem in read.problems),
        )

    @property
    def last(self) -> HistoryPoint | None:
        return self.points[-1] if self.points else None


@dataclass(frozen=True)
class TimeAxis:
    """Time since `start` in one unit: seconds, minutes or hours, by the span shown."""

    start: float
    unit: str
    per: float
    """Seconds in one unit."""
    span: float = 0.0
    """Seconds from the first point to the last."""

    @classmethod
    def over(cls, histories: Sequence[DatasetHistory]) -> TimeAxis:
        times = [p.t for h in histories for p in h.points]
        if not times:
            return cls(0.0, "s", 1.0)
        span = max(times) - min(times)
        unit, per = ("s", 1.0) if span < 180 else ("min", 60.0) if span < 3 * 3600 else ("h", 3600)
        return cls(min(times), unit, per, span)

    def ticks(self, steps: int = 5) -> tuple[list[float], list[str]]:
        """Ticks at round times in the axis's unit (0, 15, 30 s; not 0, 16.7, 33.5)."""
        values = ticks_within(self.span / self.per, steps)
        return values, [f"{value:g}" for value in values]

    def x(self, point: HistoryPoint) -> float:
        return (point.t - self.start) / self.per

    def label(self) -> str:
        clock = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.start)) if self.start else "?"
        return f"{self.unit} since {clock}"


def count_ticks(top: float, budget: int | None = None) -> tuple[list[float], list[str]]:
    """Y ticks from 0 to `top` at a round step, labelled short (1.5M, not 1500000.0), with
    the budget as a tick of its own (named) in place of any round one too near it."""
    if top <= 0:
        return [0.0], ["0"]
    values = ticks_within(top)
    step = values[1] if len(values) > 1 else top
    labels = [format_count(v) for v in values]
    if budget:
        near = [i for i, v in enumerate(values) if abs(v - budget) < step / 2]
        for i in reversed(near):
            del values[i], labels[i]
        values.append(float(budget))
        labels.append(f"budget {format_count(budget)}")
    return values, labels


def summary(history: DatasetHistory, budget: int | None) -> str:
    """One line under the plots: the last point's figures, the budget, the runs, the span."""
    if history.error:
        return f"{history.dataset}: no history to show: {history.error}"
    last = history.last
    if last is None:
        return f"{history.dataset}: no history yet (a run writes a point every few seconds)"
    first = history.points[0]
    of = f" of {format_count(budget)} budget" if budget else " (no token budget)"
    runs = len({p.pid for p in history.points})
    rates = [p.tok_s for p in history.points if p.tok_s > 0]
    peak = f", peak {format_count(max(rates))} tok/s" if rates else ""
    parts = [
        f"{history.dataset}: {format_count(last.tokens)} tokens{of}",
        f"{last.samples:,} samples",
        f"last {format_count(last.tok_s)} tok/s{peak}",
        f"{len(history.points):,}{f' of {history.of:,}' if history.of else ''} points"
        f" over {_span(last.t - first.t)}",
        f"{runs} run{'s' if runs != 1 else ''}",
        last.state,
    ]
    if history.partial:
        parts.append("older points not fetched")
    if history.bad:
        parts.append(f"{history.bad} bad line{'s' if history.bad != 1 else ''}")
    return " · ".join(one_line(part, 200) for part in parts)


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
