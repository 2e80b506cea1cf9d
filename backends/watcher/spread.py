"""A tail request's `spread` option: at most N lines of a file, spread from its first to its last.

Why: the plot view draws a dataset's whole night from history.jsonl, and a plain tail's
1,000 last points are only the last ~80 minutes of it. The history file is bounded (it is
compacted by age near 1 MiB), so the watcher can read all of it on the box and send only N
lines picked evenly by line number, the first and the last always among them: the plot
covers the whole run and the link carries what a tail would.

Bounded whatever the file: at most SPREAD_SCAN_BYTES are read (the end of a larger file;
its start is then said, not read), the lines kept never pass `max_bytes` (more are thinned,
every other one, until they fit) and a line longer than that is never held.
"""

from __future__ import annotations

import os
import typing

from .files import open_regular

SPREAD_SCAN_BYTES = 16 << 20
"""The most of a file one spread request reads: sixteen times a compacted history file."""
SPREAD_CHUNK = 256 << 10


def spread_lines(
    path: str, points: int, max_bytes: int, whole: bool = False
) -> dict[str, typing.Any]:
    """At most `points` lines of the regular file `path`, spread evenly over it.

    The `tail` line carries, beyond a tail's `lines`, `size` and `cut`: `numbers` (each
    line's number, from 1 at `start`), `start` (the byte the read began at: 0 unless the
    file passed SPREAD_SCAN_BYTES) and `total` (the lines the points were picked from).
    `cut` is true when lines that were picked did not fit in `max_bytes`. With `whole`, a
    partial last line (a point being written) is left out.
    """
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        start = _line_start(fd, max(0, size - SPREAD_SCAN_BYTES))
        end, total = _count_lines(fd, start, size, whole)
        picked, cut = _pick(fd, start, end, total, max(0, points), max(0, max_bytes))
    finally:
        os.close(fd)
    return {
        "type": "tail",
        "lines": [line.decode("utf-8", "replace") for _, line in picked],
        "numbers": [number + 1 for number, _ in picked],
        "size": size,
        "cut": cut,
        "start": start,
        "total": total,
    }


def _line_start(fd: int, pos: int) -> int:
    """The first byte of the first whole line at or after `pos` (a line cut by the scan
    bound is no line of ours); the file's end when none starts there."""
    if pos == 0:
        return 0
    at = pos - 1  # from the byte before: was `pos` a line start?
    while True:
        chunk = os.pread(fd, SPREAD_CHUNK, at)
        if not chunk:
            return at
        found = chunk.find(b"\n")
        if found >= 0:
            return at + found + 1
        at += len(chunk)


def _count_lines(fd: int, start: int, size: int, whole: bool) -> tuple[int, int]:
    """(where the lines end, how many there are) in [start, size): with `whole` the end is
    just past the last line break, else a partial last line counts too. The file may grow
    meanwhile: what comes after `size` waits for the next request."""
    pos, breaks, last = start, 0, -1
    while pos < size:
        chunk = os.pread(fd, min(SPREAD_CHUNK, size - pos), pos)
        if not chunk:
            break
        breaks += chunk.count(b"\n")
        found = chunk.rfind(b"\n")
        if found >= 0:
            last = pos + found
        pos += len(chunk)
    if whole:
        return (last + 1 if last >= 0 else start), breaks
    return pos, breaks + (1 if pos > start and last != pos - 1 else 0)


def _lines(fd: int, start: int, end: int, cap: int) -> typing.Iterator[bytes | int]:
    """Each line of [start, end) in order, without its line break: its bytes, or its length
    (an int) when longer than `cap`, so a huge line is never held."""
    pos, held, over = start, b"", 0
    while pos < end:
        chunk = os.pread(fd, min(SPREAD_CHUNK, end - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        parts = chunk.split(b"\n")
        for part in parts[:-1]:
            length = over + len(held) + len(part)
            yield length if over or length > cap else held + part
            held, over = b"", 0
        rest = parts[-1]
        if over or len(held) + len(rest) > cap:
            over, held = over + len(held) + len(rest), b""
        else:
            held += rest
    if over:
        yield over
    elif held:
        yield held


def _pick(
    fd: int, start: int, end: int, total: int, points: int, max_bytes: int
) -> tuple[list[tuple[int, bytes]], bool]:
    """([(line index, bytes)], cut): the lines at `points` indices spread evenly over
    `total`, first and last included, thinned every other one (the last kept) while they
    weigh more than `max_bytes`."""
    if not points or not total:
        return [], total > 0 and points > 0
    if points >= total:
        targets = list(range(total))
    elif points == 1:
        targets = [total - 1]
    else:
        targets = [(k * (total - 1) + (points - 1) // 2) // (points - 1) for k in range(points)]
    final = len(targets) - 1
    kept, weight, stride, cut = [], 0, 1, False
    slot = 0
    for index, line in enumerate(_lines(fd, start, end, max_bytes)):
        if slot > final:
            break
        if index != targets[slot]:
            continue
        slot += 1
        if isinstance(line, int):
            cut = True
            continue
        if (slot - 1) % stride and slot - 1 != final:
            continue
        kept.append((slot - 1, index, line))
        weight += len(line) + 1
        while weight > max_bytes and kept:
            cut = True
            if stride > final:  # only the first and the last are left: keep the newest
                weight -= len(kept.pop(0)[2]) + 1
                continue
            stride *= 2
            kept = [item for item in kept if item[0] % stride == 0 or item[0] == final]
            weight = sum(len(item[2]) + 1 for item in kept)
    return [(index, line) for _, index, line in kept], cut
