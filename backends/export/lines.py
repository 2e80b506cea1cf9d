"""Record lines read with a bound: a record file is data from elsewhere once it is copied
around, and one runaway line (a file without newlines) must not be held whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

MAX_RECORD_LINE = 256 << 20
"""Far beyond the longest record the engine writes (an answer is bounded by 16 bytes a
token of max_new_tokens, eight times over, plus 4 MiB; its ids take about as much)."""


def record_lines(
    handle: BinaryIO, limit: int = MAX_RECORD_LINE
) -> Iterator[tuple[int, int, bytes | int]]:
    """(line number, byte offset, line) for each line of `handle`; a line over `limit` bytes
    is read past in chunks and given as its length instead."""
    offset = 0
    line_no = 0
    while raw := handle.readline(limit + 1):
        line_no += 1
        start = offset
        if len(raw) <= limit or raw.endswith(b"\n"):
            offset += len(raw)
            yield line_no, start, raw
            continue
        size = len(raw)
        while (chunk := handle.readline(1 << 20)) and not chunk.endswith(b"\n"):
            size += len(chunk)
        size += len(chunk)
        offset += size
        yield line_no, start, size
