"""The `--tail` mode: the last lines of a record file or of a run's log.

Why: a record file may hold 10 GB, so a tail reads backwards from the end in chunks and
costs only what its last answers weigh, bounded in bytes and lines whatever it is asked.
"""

from __future__ import annotations

import contextlib
import os
import re
import typing

from .files import _problem, is_regular, open_regular
from .names import LOG_DIR
from .spread import spread_lines

TAIL_CHUNK = 64 << 10
TAIL_MAX_BYTES = 4 << 20
"""The most a tail request reads and returns, whatever it asks for."""
TAIL_MAX_LINES = 1000
LONG_LINE = 4 << 10
"""Without `whole` (a log), a line longer than this is shown as its head and its size."""
LONG_HEAD = 500
"""The bytes of a long line's head that are shown."""
TAIL_SCAN_BYTES = 16 << 20
"""Without `whole`, the most a tail reads backwards to find where long lines start."""


_LOG_STAMP = r"-\d{8}-\d{6}\.log\Z"


def log_of(pid: int | str | None, dataset: str, output_dir: str) -> str | None:
    """Where a run's output goes: the file its stdout is (any run of this user started with
    its output in a file, gen-tui's detached starts included), else the newest of the
    output folder's start logs for `dataset` (a run that has ended); None when neither."""
    if pid:
        with contextlib.suppress(OSError):
            target = os.readlink("/proc/%d/fd/1" % int(pid))
            if target.startswith("/") and is_regular(os.stat(target).st_mode):
                return target
    folder = os.path.join(output_dir, LOG_DIR)
    pattern = re.compile(re.escape(dataset) + _LOG_STAMP)
    try:
        names = [name for name in os.listdir(folder) if pattern.match(name)]
    except OSError:
        return None
    return os.path.join(folder, max(names)) if names else None  # the stamp sorts by time


def tail_request(spec: dict[str, typing.Any]) -> dict[str, typing.Any]:
    """The `--tail` request: a file's last lines, or a `tail` line naming why not."""
    path = spec.get("path")
    if path is None:
        path = log_of(spec.get("pid"), str(spec.get("dataset", "")), str(spec.get("output_dir")))
        if path is None:
            return {"type": "tail", "error": "no log found for this run"}
    try:
        if spec.get("spread"):  # the whole file's span, thinned (see spread.py)
            report = spread_lines(
                str(path),
                min(int(spec.get("lines", 20)), TAIL_MAX_LINES),
                min(int(spec.get("max_bytes", TAIL_MAX_BYTES)), TAIL_MAX_BYTES),
                bool(spec.get("whole")),
            )
        else:
            report = tail(
                str(path),
                int(spec.get("lines", 20)),
                int(spec.get("max_bytes", TAIL_MAX_BYTES)),
                bool(spec.get("whole")),
            )
    except OSError as exc:
        why = _problem(os.path.basename(str(path)), exc) or "%s does not exist" % path
        return {"type": "tail", "error": why, "path": str(path)}
    report["path"] = str(path)
    return report


def tail(path: str, lines: int, max_bytes: int, whole: bool = False) -> dict[str, typing.Any]:
    """The last `lines` lines of the regular file `path` (see `--tail` in the docstring).

    With `whole` (records), a line that does not fit in `max_bytes` is not returned in part
    (the bytes read are its tail, not its head): `cut` says lines are missing, and no older
    line is read past it. Without it (a log), see :func:`_log_tail`.
    """
    lines = max(0, min(int(lines), TAIL_MAX_LINES))
    max_bytes = max(0, min(int(max_bytes), TAIL_MAX_BYTES))
    fd = open_regular(path)
    if not whole:
        try:
            return _log_tail(fd, lines, max_bytes)
        finally:
            os.close(fd)
    try:
        size = os.fstat(fd).st_size
        end = size
        if whole:  # a record being written is no line yet: end at the last line break
            end = 0
            pos = size
            while pos > 0:
                start = max(0, pos - TAIL_CHUNK)
                found = os.pread(fd, pos - start, start).rfind(b"\n")
                if found >= 0:
                    end = start + found + 1
                    break
                pos = start
        pos, buf = end, b""
        # Back from the end until `lines` whole lines are in `buf`, or the start, or the cap.
        while pos > 0 and end - pos < max_bytes and buf.count(b"\n", 0, len(buf) - 1) < lines:
            start = max(0, pos - TAIL_CHUNK, end - max_bytes)
            buf = os.pread(fd, pos - start, start) + buf
            pos = start
    finally:
        os.close(fd)
    parts = buf.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    if pos > 0 and parts:  # the first part is the tail of a longer line
        parts.pop(0)
    parts = parts[max(0, len(parts) - lines) :] if lines else []
    cut = pos > 0 and end - pos >= max_bytes and len(parts) < lines
    text = [part.decode("utf-8", "replace") for part in parts]
    return {"type": "tail", "lines": text, "size": size, "cut": cut}


def _log_tail(fd: int, lines: int, max_bytes: int) -> dict[str, typing.Any]:
    """The last `lines` lines of a log: a line over LONG_LINE bytes is its head and its size.

    Why: a log's last line may be megabytes (a progress bar redrawn with `\\r`, a dumped
    answer). Read as a plain tail, the byte cap held only the end of that line, which was
    dropped as a partial line: the view said "(empty so far)" and hid every earlier line.
    Here each line costs at most LONG_LINE of the cap, so the earlier lines still come, and
    the long one says what it is. Reading stops after TAIL_SCAN_BYTES: a line longer than
    that is shown by its end, with the size it has at least.
    """
    size = os.fstat(fd).st_size
    end = size - 1 if size and os.pread(fd, 1, size - 1) == b"\n" else size
    picked: list[tuple[int, int, bool]] = []
    used = 0
    cut = False
    for start, stop, known in _spans(fd, end) if size else ():
        if len(picked) >= lines:
            break
        cost = min(stop - start, LONG_LINE) if known else LONG_HEAD
        if used + cost > max_bytes:
            cut = True
            break
        picked.append((start, stop, known))
        used += cost
        if not known:
            cut = True
            break
    text = [_line_text(fd, *span) for span in reversed(picked)]
    return {"type": "tail", "lines": text, "size": size, "cut": cut}


def _spans(fd: int, end: int) -> typing.Iterator[tuple[int, int, bool]]:
    """(start, stop, start known) of each line that ends at or before `end`, the last
    first (stop: where its newline is). Nothing is kept but one chunk; after
    TAIL_SCAN_BYTES, the line being read is given with the lowest offset read, not known."""
    pos = stop = end
    while pos > 0:
        if end - pos >= TAIL_SCAN_BYTES:
            yield pos, stop, False
            return
        start = max(0, pos - TAIL_CHUNK)
        chunk = os.pread(fd, pos - start, start)
        at = len(chunk)
        while True:
            found = chunk.rfind(b"\n", 0, at)
            if found < 0:
                break
            yield start + found + 1, stop, True
            stop = start + found
            at = found
        pos = start
    yield 0, stop, True


def _line_text(fd: int, start: int, stop: int, known: bool) -> str:
    """The text of the line at [start, stop): whole, or its head (its end, when its start
    was not found) and its size."""
    length = stop - start
    if known and length <= LONG_LINE:
        return os.pread(fd, length, start).decode("utf-8", "replace")
    if known:
        head = os.pread(fd, LONG_HEAD, start).decode("utf-8", "replace")
        return "%s\u2026 (cut: the line is %s bytes)" % (head, "{:,}".format(length))
    end = os.pread(fd, LONG_HEAD, stop - LONG_HEAD).decode("utf-8", "replace")
    return "(cut: a line of over %s bytes, its end:) \u2026%s" % ("{:,}".format(length), end)
