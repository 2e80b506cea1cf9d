"""history.jsonl: each dataset's progress over time, kept across kills, resumes and nights.

progress.json is replaced a few times a second and so forgets; the record file knows what
was written but not when the run was slow, paused or waiting for disk. The history file is
the timeline: the run that holds a dataset's lock appends one JSON line every
HISTORY_EVERY_S seconds (and whenever the dataset's state changes) to
`<output-dir>/<dataset>/history.jsonl`, beside its records. A resumed run appends to the same
file, so the timeline of a night with two kills is one file with three pids in it.

Crash-safe: each point is one `write()` of a whole line to a file opened O_APPEND; a line
torn by a crash is cut off when the next run opens the file (it holds the lock), and the
reader skips what does not parse, counting it. Bounded: when the file passes
HISTORY_COMPACT_BYTES it is rewritten (temporary file, then rename) with older points
thinned by age (HISTORY_TIERS): full resolution for the last hour, one a minute for the
last day, one every ten minutes before, state changes always kept.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gen_tui.backends.bounds import COUNT, DOLLARS, PID, RATE, UNIX_TIME, Range
from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.backends.store.record_scan import record_lines
from gen_tui.backends.watcher import HISTORY_FILE, open_own, open_regular

__all__ = [
    "HISTORY_FILE",
    "HistoryPoint",
    "HistoryRead",
    "HistoryWriter",
    "parse_history_lines",
    "read_history",
    "thin",
]

HISTORY_EVERY_S = 5.0
"""Seconds between two points of a running dataset: fine enough for a throughput plot, and
a night at this pace is 7,200 lines before compaction."""
HISTORY_TIERS: tuple[tuple[float, float], ...] = ((3600.0, 0.0), (86400.0, 60.0), (math.inf, 600.0))
"""(age up to, one point per this many seconds): 0 keeps every point."""
HISTORY_COMPACT_BYTES = 1 << 20
"""A file past this size is thinned by HISTORY_TIERS (a point is about 150 bytes)."""
HISTORY_MAX_LINE = 4096
"""A longer line is no point of ours: the reader counts it as bad without holding it."""
MAX_PROBLEMS = 5
"""Bad lines named one by one; more are only counted."""


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One moment of one dataset, as a history line holds it."""

    t: float
    """Unix time."""
    pid: int
    state: str
    tokens: int
    samples: int
    tok_s: float
    inflight: int
    errors: int
    truncated: int | None = None
    """Answers cut at max_new_tokens in this run so far (None: the writer did not count)."""
    cost: float | None = None

    @classmethod
    def of(cls, snap: DatasetSnapshot, now: float | None = None) -> HistoryPoint:
        return cls(
            t=round(time.time() if now is None else now, 3),
            pid=snap.pid,
            state=str(snap.state),
            tokens=snap.tokens,
            samples=snap.samples,
            tok_s=round(snap.tok_s, 2),
            inflight=snap.inflight,
            errors=snap.errors,
            truncated=snap.truncated if snap.truncated_of else None,
            cost=snap.cost,
        )

    def to_line(self) -> bytes:
        data: dict[str, Any] = {
            "t": self.t,
            "pid": self.pid,
            "state": self.state,
            "tokens": self.tokens,
            "samples": self.samples,
            "tok_s": self.tok_s,
            "inflight": self.inflight,
            "errors": self.errors,
        }
        if self.truncated is not None:
            data["truncated"] = self.truncated
        if self.cost is not None:
            data["cost"] = self.cost
        return orjson.dumps(data) + b"\n"

    @classmethod
    def parse(cls, value: Any) -> HistoryPoint | str:
        """The point in a parsed line, or the name of the field that is wrong (of a wrong
        type, or a number out of its kind's range: bounds.py)."""
        if not isinstance(value, dict):
            return "not a JSON object"
        fields: dict[str, Any] = {}
        for name, kinds, required, bounds in _FIELDS:
            item = value.get(name)
            if item is None and not required:
                continue
            if isinstance(item, bool) or not isinstance(item, kinds):
                return f"field {name!r} is missing or of the wrong type"
            if bounds is not None and bounds.check(item) is None:
                return bounds.problem(name, item)
            fields[name] = item
        return cls(**fields)


_FIELDS: tuple[tuple[str, tuple[type, ...], bool, Range | None], ...] = (
    ("t", (int, float), True, UNIX_TIME),
    ("pid", (int,), True, PID),
    ("state", (str,), True, None),
    ("tokens", (int,), True, COUNT),
    ("samples", (int,), True, COUNT),
    ("tok_s", (int, float), True, RATE),
    ("inflight", (int,), True, COUNT),
    ("errors", (int,), True, COUNT),
    ("truncated", (int,), False, COUNT),
    ("cost", (int, float), False, DOLLARS),
)


def thin(points: Iterable[HistoryPoint], now: float) -> list[HistoryPoint]:
    """`points` with older ones thinned by HISTORY_TIERS: the first point of each time
    bucket stays, and so does every point whose state or pid differs from the one before
    (a resume, a pause, the end), so thinning never hides what happened."""
    kept: list[HistoryPoint] = []
    last_bucket: tuple[float, int] | None = None
    previous: HistoryPoint | None = None
    for point in points:
        age = now - point.t
        step = next(step for limit, step in HISTORY_TIERS if age <= limit)
        bucket = (step, int(point.t // step)) if step else (0.0, len(kept))
        changed = previous is None or (point.state, point.pid) != (previous.state, previous.pid)
        if changed or bucket != last_bucket:
            kept.append(point)
            last_bucket = bucket
        previous = point
    return kept


@dataclass
class HistoryRead:
    """What a history file holds, with the lines that were not points said, not dropped."""

    points: list[HistoryPoint] = field(default_factory=list)
    bad: int = 0
    problems: list[str] = field(default_factory=list)
    """One line each for the first MAX_PROBLEMS bad lines: file, line number and why."""


def read_history(path: Path, max_points: int | None = None) -> HistoryRead:
    """The points of `path` in order, streamed (flat memory on any file: with `max_points`,
    every other point is dropped whenever twice that many are held). A missing file is an
    empty history; any other failure to open it raises OSError (BadFile for a link)."""
    result = HistoryRead()
    try:
        fd = open_regular(os.fspath(path))
    except FileNotFoundError:
        return result
    with os.fdopen(fd, "rb") as handle:
        for line_no, _, raw in record_lines(handle, HISTORY_MAX_LINE):
            if isinstance(raw, int):
                _bad(result, path, line_no, f"a line of {raw} bytes")
                continue
            _take(result, path, line_no, raw)
            if max_points is not None and len(result.points) >= 2 * max_points:
                result.points = result.points[::2]
    return result


def parse_history_lines(
    lines: Iterable[str], where: str, first_line: int = 1, numbers: Sequence[int] = ()
) -> HistoryRead:
    """The points of lines already read (a history file fetched through the watcher, maybe
    from another machine), with the bad ones said as `read_history` says them: each line's
    number is in `numbers` (lines picked across the file) or counts on from `first_line`.
    Each line is bounded by HISTORY_MAX_LINE, like the file reader's."""
    result = HistoryRead()
    for index, line in enumerate(lines):
        line_no = numbers[index] if index < len(numbers) else first_line + index
        raw = line.encode("utf-8", "replace")
        if len(raw) > HISTORY_MAX_LINE:
            _bad(result, where, line_no, f"a line of {len(raw)} bytes")
            continue
        _take(result, where, line_no, raw + b"\n")
    return result


def _take(result: HistoryRead, path: Path | str, line_no: int, raw: bytes) -> None:
    """Add the point of one raw line to `result`, or say why it is none."""
    if not raw.strip():
        return
    try:
        parsed: HistoryPoint | str = HistoryPoint.parse(orjson.loads(raw))
    except orjson.JSONDecodeError:
        parsed = "not JSON" if raw.endswith(b"\n") else "cut off (a crash mid-write)"
    if isinstance(parsed, str):
        _bad(result, path, line_no, parsed)
    else:
        result.points.append(parsed)


def _bad(result: HistoryRead, path: Path | str, line_no: int, why: str) -> None:
    result.bad += 1
    if len(result.problems) < MAX_PROBLEMS:
        result.problems.append(f"{path}:{line_no}: {why}")


class HistoryWriter:
    """Appends one dataset's points (the run holding its lock is the only writer)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / HISTORY_FILE
        self._size = 0
        self._last: HistoryPoint | None = None

    def open(self) -> None:
        """Cut a torn last line (a crash mid-write) so the next point starts a line of its
        own, and learn the size. Raises OSError; call it with the lock held."""
        try:
            fd = open_own(os.fspath(self.path), os.O_RDWR)
        except FileNotFoundError:
            self._size = 0
            return
        try:
            size = os.fstat(fd).st_size
            if size:
                tail_from = max(0, size - HISTORY_MAX_LINE)
                tail = os.pread(fd, size - tail_from, tail_from)
                if not tail.endswith(b"\n"):
                    cut = tail.rfind(b"\n")
                    size = tail_from + cut + 1 if cut >= 0 else tail_from
                    os.ftruncate(fd, size)
            self._size = size
        finally:
            os.close(fd)

    def due(self, point: HistoryPoint) -> bool:
        """A point is worth a line every HISTORY_EVERY_S, and at once when the state moves."""
        last = self._last
        return last is None or last.state != point.state or point.t - last.t >= HISTORY_EVERY_S

    def append(self, point: HistoryPoint) -> None:
        """Write `point` as one line (one `write()`), compacting a file grown too large.

        Raises OSError (BadFile for a planted link): the caller says it once.
        """
        line = point.to_line()
        fd = open_own(os.fspath(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        self._last = point
        self._size += len(line)
        if self._size > HISTORY_COMPACT_BYTES:
            self.compact(point.t)

    def compact(self, now: float) -> None:
        """Rewrite the file thinned by age (a new file renamed over the old one: a crash
        leaves one or the other, whole)."""
        points = thin(read_history(self.path).points, now)
        data = b"".join(point.to_line() for point in points)
        while len(points) > 2 and len(data) > HISTORY_COMPACT_BYTES // 2:
            half = len(points) // 2  # months of points: the older half at half the pace
            points = points[:half:2] + points[half:]
            data = b"".join(point.to_line() for point in points)
        folder = self.path.parent
        fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(name, 0o644)
            os.replace(name, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise
        self._size = len(data)
