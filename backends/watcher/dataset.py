"""Watch mode: exact, incremental token totals of each dataset folder, as report lines.

Why incremental: a record file grows by a line per answer and may hold hundreds of MB, so a
:class:`DatasetTail` reads only what was appended since its last poll, from a byte offset
that moves past whole lines only (its `resume` lets a later watcher continue from there
without recounting), and its totals always equal those of a full recount.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import typing

from .counting import _json_figures, record_figures
from .emit import _emit, _flush, boot_id
from .files import BadFile, _problem, is_regular, open_regular, read_json_object
from .locks import _lock_status, read_lock_table
from .names import (
    DATASET_NAME,
    LOCK_FILE,
    PROGRESS_FILE,
    PROGRESS_MAX_BYTES,
    RAW_FILE,
    RECORD_MAX_BYTES,
)
from .telemetry import Telemetry

PROTOCOL = 1  # the report lines' version, in the `hello` line
CHUNK = 4 << 20  # a record file is read this much at a time
# What one poll reads of one record file at most, and for about how long: a 3 GB file with
# no newline (another user's, beside ours) is read over many polls, while the other
# datasets and the heartbeat go on.
POLL_BYTES = 256 << 20
POLL_BUDGET_S = 0.25
# An unfinished line is kept in memory up to this; a longer one is read back from the file
# when its end comes (at most RECORD_MAX_BYTES), or skipped unread past that.
HOLD_BYTES = CHUNK
POLL_S = 0.5
HEARTBEAT_S = 2.0
# A progress.json this old no longer describes a live writer.
PROGRESS_FRESH_S = 10.0


class DatasetTail:
    """Incremental, exact token totals of one dataset folder.

    `offset` only ever moves past complete lines, so no byte is counted twice; the client
    restarts a watcher from `resume` after a reconnect.
    """

    def __init__(
        self,
        output_dir: str,
        name: str,
        offset: int = 0,
        ino: int = 0,
        tokens: int = 0,
        samples: int = 0,
        truncated: int = 0,
    ) -> None:
        self.name = name
        self.folder = os.path.join(output_dir, name)
        self.path = os.path.join(self.folder, RAW_FILE)
        self.offset = offset
        self.ino = ino
        self.tokens = tokens
        self.samples = samples
        self.truncated = truncated
        """Records cut at their cap (`record_cut`): the panel's truncated share, for a
        foreign script's run as for ours."""
        self.bad_lines = 0
        self.first_bad: str | None = None
        self.tail_tokens = 0
        self.tail_samples = 0
        self.tail_truncated = 0
        self.tail_bytes = 0
        self.size = 0
        self.mtime: float | None = None
        self.exists = False
        self.resets = 0
        self.locked = False
        self.lock_pid: int | None = None
        self.progress: dict[str, typing.Any] | None = None
        self.progress_mtime: float | None = None
        self.problems: dict[str, str] = {}
        """{file name: one line}: the folder's files that cannot be read as they stand."""
        self._last_key: tuple[object, ...] | None = None
        self._progress_said: tuple[object, ...] | None = None
        """(mtime, problem) of the progress.json the last report carried: a report
        carries `progress` only when that changed (see `report`)."""
        self.scanned = 0
        """Bytes after `offset` already read and holding no newline (see _read_appended)."""
        self._held: list[bytes] = []

    @property
    def total_tokens(self) -> int:
        return self.tokens + self.tail_tokens

    @property
    def total_samples(self) -> int:
        return self.samples + self.tail_samples

    @property
    def total_truncated(self) -> int:
        return self.truncated + self.tail_truncated

    def _reset(self) -> None:
        self.offset = 0
        self.scanned = 0
        self._held = []
        self.tokens = 0
        self.samples = 0
        self.truncated = 0
        self.bad_lines = 0
        self.first_bad = None
        self.resets += 1

    @property
    def problem(self) -> str | None:
        """What is wrong with this dataset's files, in one line (None: nothing)."""
        if not self.problems:
            return None
        return "; ".join(self.problems[name] for name in sorted(self.problems))

    def _note(self, name: str, problem: str | None) -> None:
        if problem is None:
            self.problems.pop(name, None)
        else:
            self.problems[name] = problem

    def _count(self, data: bytes) -> None:
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            figures = record_figures(line)
            if figures is None:
                self._bad(line[:80].decode("utf-8", "replace"))
                continue
            self.tokens += figures[0]
            self.samples += 1
            self.truncated += figures[1]

    def _bad(self, what: str) -> None:
        self.bad_lines += 1
        if self.first_bad is None:
            self.first_bad = what

    def poll(self, budget_s: float = POLL_BUDGET_S) -> None:
        """Count whatever was appended since the last poll, reading at most POLL_BYTES or
        for about `budget_s`: the rest is read by the next polls, from where this one
        stopped, so one file can never hold up the other datasets or the heartbeat."""
        try:
            fd = open_regular(self.path)
        except (OSError, BadFile) as exc:
            if self.exists or self.offset:
                self._reset()
            self.exists = False
            self.size = 0
            self.mtime = None
            self.tail_tokens = self.tail_samples = self.tail_truncated = self.tail_bytes = 0
            self._note(RAW_FILE, _problem(RAW_FILE, exc))
            return
        with os.fdopen(fd, "rb") as handle:
            self._note(RAW_FILE, None)
            self._read_appended(handle, os.fstat(fd), time.monotonic() + budget_s)

    def _read_appended(self, handle: typing.IO[bytes], st: os.stat_result, deadline: float) -> None:
        """Scan on from the last poll's place. `offset` moves past whole lines only;
        `scanned` bytes after it hold no newline (the line being written, or a hostile one):
        they are kept in memory only up to HOLD_BYTES and never scanned twice, and a line
        over RECORD_MAX_BYTES is skipped by its offset once its end is found."""
        self.exists = True
        if (self.ino and st.st_ino != self.ino) or st.st_size < self.offset:
            self._reset()
        self.ino = st.st_ino
        self.mtime = st.st_mtime
        end = st.st_size
        if end == self.offset + self.scanned:
            return
        if end < self.offset + self.scanned or self.scanned <= HOLD_BYTES:
            # A short unfinished line is read again whole (a torn tail moved aside and the
            # file appended to since must not be glued to what was held); only a long one
            # is carried on from where the last poll stopped.
            self.scanned = 0
            self._held = []
        pos = self.offset + self.scanned
        handle.seek(pos)
        budget = POLL_BYTES
        while pos < end and budget > 0:
            chunk = handle.read(min(CHUNK, end - pos))
            if not chunk:
                break
            pos += len(chunk)
            budget -= len(chunk)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                first = chunk.find(b"\n")
                self._end_line(handle, chunk[:first])
                if cut > first:
                    self._count(chunk[first + 1 : cut])
                self.offset = pos - len(chunk) + cut + 1
                chunk = chunk[cut + 1 :]
            self._hold(chunk)
            if time.monotonic() > deadline:
                break
        self.size = self.offset + self.scanned
        self.tail_bytes = self.scanned
        rest = b"".join(self._held).strip() if pos >= end and self.scanned <= HOLD_BYTES else b""
        figures = _json_figures(rest) if rest else None
        self.tail_tokens = figures[0] if figures is not None else 0
        self.tail_samples = 1 if figures is not None else 0
        self.tail_truncated = 1 if figures is not None and figures[1] else 0

    def _hold(self, data: bytes) -> None:
        """`data` continues the unfinished line: kept while that line is short."""
        self.scanned += len(data)
        if self.scanned <= HOLD_BYTES:
            if data:
                self._held.append(data)
        else:
            self._held = []

    def _end_line(self, handle: typing.IO[bytes], piece: bytes) -> None:
        """The unfinished line ends with `piece`: count it (read back from the file when it
        was too long to keep), or skip it, unread, when no record is that long."""
        length = self.scanned + len(piece)
        if length > RECORD_MAX_BYTES:
            self._bad("(a line of %d bytes, longer than any record: skipped)" % length)
        elif self.scanned <= HOLD_BYTES:
            self._count(b"".join(self._held) + piece if self._held else piece)
        else:
            self._count(os.pread(handle.fileno(), length, self.offset))
        self.scanned = 0
        self._held = []

    def poll_meta(self, table: dict[tuple[int, int, int], int] | None) -> None:
        """Refresh the lock holder and, when it changed on disk, progress.json."""
        lock = os.path.join(self.folder, LOCK_FILE)
        self.locked, self.lock_pid, _, problem = _lock_status(lock, table)
        self._note(LOCK_FILE, problem)
        path = os.path.join(self.folder, PROGRESS_FILE)
        try:
            st = os.lstat(path)
        except OSError:
            self.progress = None
            self.progress_mtime = None
            self._note(PROGRESS_FILE, None)
            return
        if st.st_mtime == self.progress_mtime and is_regular(st.st_mode):
            return
        try:
            value = read_json_object(path, PROGRESS_MAX_BYTES)
        except FileNotFoundError:
            return  # replaced atomically, so a failed read only means "read it next time"
        except (OSError, BadFile) as exc:
            # Shown, not kept: a progress.json that cannot be read describes nothing.
            self.progress = None
            self.progress_mtime = st.st_mtime
            self._note(PROGRESS_FILE, _problem(PROGRESS_FILE, exc))
            return
        self.progress = value
        self.progress_mtime = st.st_mtime
        self._note(PROGRESS_FILE, None)

    def resume_arg(self) -> str:
        return "%s:%d:%d:%d:%d:%d" % (
            self.name,
            self.offset,
            self.ino,
            self.tokens,
            self.samples,
            self.truncated,
        )

    def report(self, now: float) -> dict[str, typing.Any] | None:
        """The dataset line if anything a client shows changed since the last report."""
        key = (
            self.exists,
            self.total_tokens,
            self.total_samples,
            self.total_truncated,
            self.offset,
            self.bad_lines,
            self.locked,
            self.lock_pid,
            self.progress_mtime,
            self.resets,
            self.problem,
        )
        if key == self._last_key:
            return None
        self._last_key = key
        fresh = self.progress_mtime is not None and now - self.progress_mtime < PROGRESS_FRESH_S
        line: dict[str, typing.Any] = {
            "type": "dataset",
            "dataset": self.name,
            "exists": self.exists,
            "tokens": self.total_tokens,
            "samples": self.total_samples,
            "truncated": self.total_truncated,
            "offset": self.offset,
            "ino": self.ino,
            "size": self.size,
            "tail_tokens": self.tail_tokens,
            "tail_samples": self.tail_samples,
            "tail_truncated": self.tail_truncated,
            "bad_lines": self.bad_lines,
            "first_bad": self.first_bad,
            "resets": self.resets,
            "locked": self.locked,
            "lock_pid": self.lock_pid,
            "mtime": self.mtime,
            "progress": self.progress,
            "progress_fresh": fresh,
            "problem": self.problem,
            "resume": self.resume_arg(),
            "time": now,
        }
        # progress.json (~3 KB) only when it changed: a record appended between two of its
        # writes (once a second) made a line that repeated it, half the lines of a fleet of
        # 64 (issue 31). A line without the key keeps the progress the last one carried.
        said = (self.progress_mtime, self.problems.get(PROGRESS_FILE))
        if said == self._progress_said:
            del line["progress"]
        self._progress_said = said
        return line


def parse_dataset_arg(output_dir: str, arg: str) -> DatasetTail:
    """`NAME` or `NAME:OFFSET:INO:TOKENS:SAMPLES:TRUNCATED` (the `resume` of an earlier
    report)."""
    parts = arg.split(":")
    name = parts[0]
    if not DATASET_NAME.match(name):
        raise ValueError("dataset name %r is not allowed" % name)
    if len(parts) == 1:
        return DatasetTail(output_dir, name)
    if len(parts) != 6:
        raise ValueError(
            "bad dataset argument %r (NAME or NAME:OFFSET:INO:TOKENS:SAMPLES:TRUNCATED)" % arg
        )
    numbers = [int(part) for part in parts[1:]]
    if min(numbers) < 0:
        raise ValueError("bad dataset argument %r" % arg)
    return DatasetTail(output_dir, name, *numbers)


def watch(
    output_dir: str,
    tails: list[DatasetTail],
    once: bool = False,
    interval: float = POLL_S,
    heartbeat: float = HEARTBEAT_S,
    telemetry: float = 0.0,
    metrics_urls: list[str] | None = None,
) -> None:
    """Poll every `interval` s; print changes and a heartbeat; run until stdout goes away.
    With `telemetry` > 0, also read `metrics_urls` and the GPUs that often (see Telemetry)."""
    _emit(
        {
            "type": "hello",
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "boot_id": boot_id(),
            "python": "%d.%d.%d" % sys.version_info[:3],
            "output_dir": output_dir,
            "time": time.time(),
        }
    )
    if telemetry > 0 and not once:
        Telemetry(list(metrics_urls or []), telemetry).start()
    beat = _Heartbeat(heartbeat)
    while True:
        table = read_lock_table()
        for tail in tails:
            beat.maybe()  # between datasets too: a long poll never looks like a dead link
            tail.problems.pop("?", None)
            try:
                tail.poll()
                tail.poll_meta(table)
            except (OSError, ValueError, RecursionError, MemoryError) as exc:
                # One dataset's files must never blind the watcher to the others.
                tail.problems["?"] = "%s: %s" % (type(exc).__name__, str(exc)[:200])
            line = tail.report(time.time())
            if line is not None:
                _emit(line, flush=False)  # sent with the poll's others, below
        _flush()
        if once:
            return
        beat.maybe()
        time.sleep(interval)


class _Heartbeat:
    """The `heartbeat` line, at most every `every` s, whenever the loop looks in. Why it
    looks in between datasets: a client that hears nothing for three heartbeats restarts
    the watcher, and a watcher that never writes never learns its client has gone."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.seq = 0
        self.last = time.monotonic()

    def maybe(self) -> None:
        if time.monotonic() - self.last >= self.every:
            self.seq += 1
            _emit({"type": "heartbeat", "seq": self.seq, "time": time.time()})
            self.last = time.monotonic()
