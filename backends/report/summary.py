"""What a finished (or running) dataset amounts to, computed from its files alone.

`gen-tui report` reads the record file once, streamed: a night's record file may be 10 GB,
so nothing per record is kept. Latency quantiles come from a log-scaled histogram (about
1% relative error, a fixed few thousand counters), answer lengths from bins of
LENGTH_BIN tokens. The timeline (wall time, throughput, the plots) comes from
history.jsonl, the budget from progress.json, failures from errors.jsonl. A line that
cannot be read is named (file, line, field) and counted, never silently skipped.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gen_tui.backends.bounds import DOLLARS, SECONDS, UNIX_TIME, Range
from gen_tui.backends.budget.rules import overshoot
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.store.history import MAX_PROBLEMS, HistoryPoint, read_history
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.store.record_scan import record_lines
from gen_tui.backends.untrusted import QUOTED_CHARS, one_line
from gen_tui.backends.watcher import (
    ERRORS_FILE,
    HISTORY_FILE,
    PROGRESS_FILE,
    RAW_FILE,
    BadFile,
    open_regular,
    record_counts,
    record_cut,
)

LENGTH_BIN = 16
"""Answer lengths are counted in bins this many tokens wide (a 32k cap: 2,048 counters)."""
LATENCY_BINS_PER_DECADE = 100
HISTORY_POINTS = 2000
WORKING = frozenset({DatasetState.ACTIVE.value, DatasetState.DRAINING.value})
"""The states a history step counts toward a dataset's wall time from."""
"""Points per dataset kept for the plots (a longer history is thinned while read)."""
REASON_CHARS = 120
REASONS_KEPT = 1000
"""Distinct error reasons counted; past that, new ones go under "(other)"."""


class LogHistogram:
    """Counts of positive values in log-spaced bins: quantiles in fixed memory."""

    def __init__(self, per_decade: int = LATENCY_BINS_PER_DECADE) -> None:
        self.per_decade = per_decade
        self.bins: Counter[int] = Counter()
        self.count = 0

    def add(self, value: float) -> None:
        if value > 0 and math.isfinite(value):
            self.bins[math.floor(math.log10(value) * self.per_decade)] += 1
            self.count += 1

    def quantile(self, q: float) -> float | None:
        """The value below which a share `q` of the values lie (a bin's geometric middle)."""
        if not self.count:
            return None
        rank = q * self.count
        seen = 0
        for index in sorted(self.bins):
            seen += self.bins[index]
            if seen >= rank:
                return 10 ** ((index + 0.5) / self.per_decade)
        return 10 ** ((max(self.bins) + 0.5) / self.per_decade)


@dataclass
class DatasetReport:
    """One dataset's summary; None where its files do not say."""

    name: str
    tokens: int = 0
    samples: int = 0
    truncated: int = 0
    cost: float | None = None
    errors: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    budget: int | None = None
    state: str | None = None
    lengths: Counter[int] = field(default_factory=Counter)
    """Answers per LENGTH_BIN-token bin (key: the bin's first length // LENGTH_BIN)."""
    latency: LogHistogram = field(default_factory=LogHistogram)
    history: list[HistoryPoint] = field(default_factory=list)
    first_created: float | None = None
    last_created: float | None = None
    bad_lines: int = 0
    problems: list[str] = field(default_factory=list)
    turn_records: int = 0
    """Records of `--turns all` turns (with `turn` and `turns`); their tokens in turn_tokens."""
    turn_tokens: int = 0
    conversations_begun: int = 0
    """Conversations with their first turn on disk."""
    conversations_done: int = 0
    """Conversations with their last turn on disk (complete: a turn is sent only after the
    one before it is on disk); `done_turns` is the sum of their turn counts."""
    done_turns: int = 0

    @property
    def turns_per_conversation(self) -> float | None:
        return self.done_turns / self.conversations_done if self.conversations_done else None

    @property
    def tokens_per_turn(self) -> float | None:
        return self.turn_tokens / self.turn_records if self.turn_records else None

    @property
    def mean_length(self) -> float | None:
        return self.tokens / self.samples if self.samples else None

    @property
    def truncated_share(self) -> float | None:
        return self.truncated / self.samples if self.samples else None

    @property
    def overshoot(self) -> float | None:
        return overshoot(self.tokens, self.budget) if self.state == "done" else None

    @property
    def runs(self) -> int:
        """How many processes wrote the history (1 + the resumes it saw)."""
        return len({point.pid for point in self.history})

    @property
    def wall_s(self) -> float | None:
        """Seconds the dataset was being worked on: the history's steps that began while it
        was active or draining, or in which its tokens grew (a night it lay killed is not
        counted, nor the rest of a run after it was done: a dataset done in 8 s of a run of
        77 s read 1m17s and a ninth of its rate); without a history, first to last record."""
        if len(self.history) >= 2:
            steps = zip(self.history, self.history[1:], strict=False)
            return sum(
                point.t - previous.t
                for previous, point in steps
                if point.pid == previous.pid
                and (previous.state in WORKING or point.tokens > previous.tokens)
            )
        if self.first_created is not None and self.last_created is not None:
            return self.last_created - self.first_created
        return None

    @property
    def tok_s(self) -> float | None:
        wall = self.wall_s
        if not wall:
            return None
        generated = self.tokens
        if self.history:  # what was there before the first point came from an older run
            generated = max(0, self.tokens - self.history[0].tokens)
        return generated / wall

    def note(self, where: str) -> None:
        """Count an unreadable line, naming the first few."""
        self.bad_lines += 1
        if len(self.problems) < MAX_PROBLEMS:  # a bad value is quoted: bounded, one line
            self.problems.append(one_line(where))


def _add_turn(report: DatasetReport, record: dict[str, Any], tokens: int) -> None:
    """Count a `--turns all` record (one with whole-number `turn` <= `turns`; counted
    without keeping anything per conversation, so the read stays streamed)."""
    turn, turns = record.get("turn"), record.get("turns")
    if type(turn) is not int or type(turns) is not int or not 1 <= turn <= turns:
        return
    report.turn_records += 1
    report.turn_tokens += tokens
    report.conversations_begun += turn == 1
    if turn == turns:
        report.conversations_done += 1
        report.done_turns += turns


def _add_record(report: DatasetReport, record: dict[str, Any], tokens: int, where: str) -> None:
    report.tokens += tokens
    report.samples += 1
    _add_turn(report, record, tokens)
    report.lengths[tokens // LENGTH_BIN] += 1
    if record_cut(record):
        report.truncated += 1
    latency = _figure(report, record, "latency_s", SECONDS, where)
    if latency is not None:
        report.latency.add(latency)
    cost = _figure(report, record, "cost", DOLLARS, where)
    if cost is not None:
        report.cost = (report.cost or 0.0) + cost
    created = _figure(report, record, "created", UNIX_TIME, where)
    if created is not None:
        if report.first_created is None or created < report.first_created:
            report.first_created = created
        if report.last_created is None or created > report.last_created:
            report.last_created = created


def _figure(
    report: DatasetReport, record: dict[str, Any], name: str, bounds: Range, where: str
) -> float | None:
    """A record's number `name` checked against its range: None when absent or not a number
    (a foreign writer's layout), and said (the record still counts) when out of range."""
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    checked = bounds.check(value)
    if checked is None and len(report.problems) < MAX_PROBLEMS:
        report.problems.append(one_line(f"{where}: {bounds.problem(name, value)}"))
    return checked


def _read_records(report: DatasetReport, path: Path) -> None:
    for line_no, _, raw in _lines(report, path):
        if isinstance(raw, int):
            report.note(f"{path}:{line_no}: a line of {raw} bytes")
            continue
        try:
            record = orjson.loads(raw)
            _, tokens = record_counts(record)
        except orjson.JSONDecodeError:
            last = "" if raw.endswith(b"\n") else " (a torn last line: a run is writing it)"
            report.note(f"{path}:{line_no}: not JSON{last}")
            continue
        except ValueError as exc:
            report.note(f"{path}:{line_no}: {one_line(str(exc), QUOTED_CHARS)}")
            continue
        _add_record(report, record, tokens, f"{path}:{line_no}")


def _read_errors(report: DatasetReport, path: Path) -> None:
    for line_no, _, raw in _lines(report, path, limit=1 << 20):
        try:
            entry = orjson.loads(raw) if not isinstance(raw, int) else None
        except orjson.JSONDecodeError:
            entry = None
        if not isinstance(entry, dict):
            report.note(f"{path}:{line_no}: not a JSON object")
            continue
        report.errors += 1
        reason = entry.get("reason")
        text = one_line(reason[:REASON_CHARS]) if isinstance(reason, str) else "(no reason)"
        if text not in report.reasons and len(report.reasons) >= REASONS_KEPT:
            text = "(other)"
        report.reasons[text] += 1


def _lines(report: DatasetReport, path: Path, limit: int | None = None) -> Any:
    """record_lines of `path`, or nothing (said once) when it cannot be opened."""
    try:
        fd = open_regular(os.fspath(path))
    except FileNotFoundError:
        return
    except (OSError, BadFile) as exc:
        # BadFile's message starts with the file's name: put its folder before it.
        said = str(path.parent / str(exc)) if isinstance(exc, BadFile) else f"{path}: {exc}"
        report.problems.append(one_line(said))
        return
    with os.fdopen(fd, "rb") as handle:
        yield from record_lines(handle) if limit is None else record_lines(handle, limit)


def summarize(folder: Path) -> DatasetReport:
    """The report of the dataset folder `folder` (its name is the dataset's)."""
    report = DatasetReport(folder.name)
    progress = ProgressFile.read(folder / PROGRESS_FILE)
    if progress is not None:
        report.budget = progress.max_tokens
        report.state = str(progress.state) if progress.state is not None else None
    _read_records(report, folder / RAW_FILE)
    _read_errors(report, folder / ERRORS_FILE)
    try:
        read = read_history(folder / HISTORY_FILE, max_points=HISTORY_POINTS)
    except (OSError, BadFile) as exc:
        report.problems.append(one_line(f"{folder / HISTORY_FILE}: {exc}"))
    else:
        report.history = read.points
        report.bad_lines += read.bad
        report.problems.extend(read.problems[: max(0, MAX_PROBLEMS - len(report.problems))])
    return report
