"""The watcher's `spread` pick stays bounded whatever the file: the lines it keeps never pass
the byte cap (thinned every other one, the first and the last kept), a line longer than the
cap is never held, and of a file past SPREAD_SCAN_BYTES only the end is read, said so."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from gen_tui.backends import watcher

spread_module = importlib.import_module("gen_tui.backends.watcher.spread")


def numbered(count: int, width: int = 20) -> bytes:
    return b"".join(b"%0*d\n" % (width - 1, i + 1) for i in range(count))


def test_every_line_comes_back_when_fewer_than_asked(tmp_path: Path) -> None:
    path = tmp_path / "h"
    path.write_bytes(numbered(7) + b"partial")
    report = watcher.spread_lines(str(path), 100, 1 << 20, whole=True)
    assert report["numbers"] == list(range(1, 8)) and report["total"] == 7
    assert report["lines"][-1] == "0000000000000000007" and not report["cut"]
    loose = watcher.spread_lines(str(path), 100, 1 << 20)
    assert loose["lines"][-1] == "partial" and loose["total"] == 8


def test_the_byte_cap_thins_the_picked_lines_keeping_first_and_last(tmp_path: Path) -> None:
    path = tmp_path / "h"
    path.write_bytes(numbered(10_000))  # 20 bytes a line: 1,000 picks weigh 20,000
    report = watcher.spread_lines(str(path), 1000, 5000, whole=True)
    sent = sum(len(line) + 1 for line in report["lines"])
    assert sent <= 5000 and report["cut"]
    assert len(report["lines"]) >= 5000 // 20 // 2, "thinned no more than needed"
    assert report["numbers"][0] == 1 and report["numbers"][-1] == 10_000
    assert [int(line) for line in report["lines"]] == report["numbers"]


def test_a_line_longer_than_the_cap_is_skipped_not_held(tmp_path: Path) -> None:
    path = tmp_path / "h"
    path.write_bytes(b"first\n" + b"x" * 3_000_000 + b"\nlast\n")
    report = watcher.spread_lines(str(path), 10, 1000, whole=True)
    assert report["lines"] == ["first", "last"] and report["numbers"] == [1, 3]
    assert report["cut"], "a picked line did not come: said"


def test_a_file_past_the_scan_bound_is_read_from_a_line_start_near_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spread_module, "SPREAD_SCAN_BYTES", 1000)
    path = tmp_path / "h"
    path.write_bytes(numbered(500))  # 10,000 bytes: the last 1,000 are read
    report = watcher.spread_lines(str(path), 1000, 1 << 20, whole=True)
    assert report["start"] == 9000 and report["total"] == 50
    assert report["lines"][0] == f"{451:019d}" and report["lines"][-1] == f"{500:019d}"
    monkeypatch.setattr(spread_module, "SPREAD_SCAN_BYTES", 1010)  # mid-line: skip to the next
    assert watcher.spread_lines(str(path), 1000, 1 << 20)["start"] == 9000
    path.write_bytes(b"y" * 5000)  # no line starts in the read span
    assert watcher.spread_lines(str(path), 1000, 1 << 20)["lines"] == []


def test_the_request_is_bounded_whatever_it_asks(tmp_path: Path) -> None:
    path = tmp_path / "h"
    path.write_bytes(numbered(20_000, 300))  # 6 MB of 300-byte lines
    report = watcher.tail_request(
        {"path": str(path), "lines": 10**6, "max_bytes": 10**9, "spread": True}
    )
    assert len(report["lines"]) <= watcher.TAIL_MAX_LINES
    assert sum(len(line) + 1 for line in report["lines"]) <= watcher.TAIL_MAX_BYTES
    assert report["numbers"][-1] == 20_000
