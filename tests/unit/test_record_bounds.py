"""A record file copied in from elsewhere may hold a line without end: the scan reads past
it instead of holding it, names it, and a torn tail of any size is moved aside from disk."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest

from gen_tui.backends.store import record_scan
from gen_tui.backends.store.records import (
    RecordFileError,
    quarantine_torn_tail,
    record_lines,
    scan_records,
)

BOUND = 1 << 20
RUNAWAY = 24 << 20
"""24 MiB without a newline: far past the (lowered) bound of a line."""


def _record(sample_id: int, tokens: int = 7) -> bytes:
    return orjson.dumps({"sample_id": sample_id, "completion_tokens": tokens}) + b"\n"


@pytest.fixture(autouse=True)
def low_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_scan, "MAX_RECORD_LINE", BOUND)
    monkeypatch.setattr(record_scan, "TORN_KEPT", 64 << 10)


def _write(path: Path, *parts: bytes) -> None:
    with open(path, "wb") as handle:
        for part in parts:
            handle.write(part)


def test_a_runaway_line_inside_the_file_is_named_without_being_held(tmp_path: Path) -> None:
    path = tmp_path / "raw_responses.jsonl"
    _write(path, _record(1), b"x" * RUNAWAY + b"\n", _record(2))
    tracemalloc.start()
    try:
        with pytest.raises(RecordFileError) as raised:
            scan_records(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"{path}:2: a line of {RUNAWAY:,} bytes, longer than any record" in str(raised.value)
    assert peak < 8 << 20, f"the scan held {peak:,} bytes"


def test_a_runaway_torn_tail_is_moved_aside_whole_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "raw_responses.jsonl"
    head = _record(1) + _record(2, 5)
    _write(path, head, b'{"sample_id": 3, ' + b"y" * RUNAWAY)
    tracemalloc.start()
    try:
        scan = scan_records(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (scan.records, scan.tokens, scan.valid_bytes) == (2, 12, len(head))
    assert 0 < len(scan.torn_tail) <= 64 << 10 and peak < 8 << 20
    side = quarantine_torn_tail(path, scan)
    assert side is not None and side.stat().st_size == RUNAWAY + 17
    assert path.read_bytes() == head
    assert scan_records(path).records == 2


def test_record_lines_gives_a_runaway_line_as_its_length(tmp_path: Path) -> None:
    path = tmp_path / "raw_responses.jsonl"
    _write(path, _record(1), b"z" * (3 * BOUND) + b"\n", _record(2))
    with open(path, "rb") as handle:
        lines = list(record_lines(handle, limit=BOUND))
    assert [(number, line if isinstance(line, int) else orjson.loads(line)["sample_id"])
            for number, _, line in lines] == [(1, 1), (2, 3 * BOUND + 1), (3, 2)]  # fmt: skip


def test_a_line_spanning_read_chunks_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "raw_responses.jsonl"
    big = (
        orjson.dumps({"sample_id": 9, "completion_tokens": 3, "text": "w" * (BOUND - 100)}) + b"\n"
    )
    _write(path, _record(1), big, big.replace(b'"sample_id":9', b'"sample_id":10'))
    scan = scan_records(path)
    assert (scan.records, scan.tokens, sorted(scan.done)) == (3, 13, ["1", "10", "9"])


def _reference(data: bytes, limit: int) -> list[tuple[int, int, bytes | int]]:
    """record_lines' contract, said plainly: each line with its newline, or its length when
    it holds more than `limit` bytes before the newline."""
    out: list[tuple[int, int, bytes | int]] = []
    offset = 0
    for number, line in enumerate(data.splitlines(keepends=True), start=1):
        body = len(line) - line.endswith(b"\n")
        out.append((number, offset, line if body <= limit else len(line)))
        offset += len(line)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_record_lines_measures_long_lines_before_holding_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Tiny chunks and a tiny held bound, so every path runs: lines inside a chunk, across
    chunks, measured and read back, measured and given as a length, a last line without a
    newline of each kind."""
    import random

    monkeypatch.setattr(record_scan, "_CHUNK", 7)
    monkeypatch.setattr(record_scan, "HELD_LINE", 16)
    rng = random.Random(seed)
    lengths = [rng.choice([0, 1, 5, 6, 7, 8, 15, 16, 17, 29, 30, 31, 60]) for _ in range(30)]
    data = b"".join(bytes([97 + n % 26]) * n + b"\n" for n in lengths)
    data += bytes(rng.choice([0, 3, 16, 30, 31, 50]))  # a last line without a newline
    path = tmp_path / "raw_responses.jsonl"
    path.write_bytes(data)
    with open(path, "rb") as handle:
        got = list(record_lines(handle, 30))
    assert got == _reference(data, 30)
