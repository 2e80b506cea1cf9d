"""history.jsonl: thinning by age, a reader that names bad lines, a writer that survives
torn tails and stays bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gen_tui.backends.store import history
from gen_tui.backends.store.history import (
    HISTORY_EVERY_S,
    HistoryPoint,
    HistoryWriter,
    read_history,
    thin,
)
from gen_tui.backends.watcher import BadFile

NOW = 1_800_000_000.0


def point(t: float, tokens: int = 0, state: str = "active", pid: int = 7) -> HistoryPoint:
    return HistoryPoint(t, pid, state, tokens, tokens // 10, 100.0, 4, 0, truncated=1)


def test_thin_keeps_the_last_hour_whole_and_one_a_minute_before() -> None:
    points = [point(NOW - age) for age in range(7200, -1, -5)]  # two hours every 5 s
    kept = thin(points, NOW)
    recent = [p for p in kept if NOW - p.t <= 3600]
    older = [p for p in kept if NOW - p.t > 3600]
    assert len(recent) == 721
    assert 59 <= len(older) <= 61
    assert kept == sorted(kept, key=lambda p: p.t)


def test_thin_never_drops_a_state_change_or_a_resume() -> None:
    points = [point(NOW - 86400 * 3 + i, state="active") for i in range(100)]
    points[50] = point(NOW - 86400 * 3 + 50, state="paused")
    points[80] = point(NOW - 86400 * 3 + 80, pid=8)
    kept = thin(points, NOW)
    assert [p.state for p in kept].count("paused") == 1
    assert any(p.pid == 8 for p in kept)
    assert len(kept) < 10


def test_reader_skips_bad_lines_and_names_them(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    good = point(NOW, 100).to_line()
    path.write_bytes(
        good
        + b"{not json\n"
        + b'{"t": 1, "pid": 1, "state": "active", "tokens": "many"}\n'
        + b"x" * 10_000
        + b"\n"
        + good
        + b'{"t": 2, "pid"'
    )
    read = read_history(path)
    assert [p.tokens for p in read.points] == [100, 100]
    assert read.bad == 4
    assert read.problems[0] == f"{path}:2: not JSON"
    assert "'tokens'" in read.problems[1] and ":3:" in read.problems[1]
    assert "10001 bytes" in read.problems[2]
    assert read.problems[3].endswith(":6: cut off (a crash mid-write)")


def test_reader_bounds_memory_and_refuses_a_link(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"".join(point(NOW + i, i).to_line() for i in range(1000)))
    read = read_history(path, max_points=100)
    assert len(read.points) < 200
    assert read.points[0].tokens == 0 and read.points == sorted(read.points, key=lambda p: p.t)
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    with pytest.raises(BadFile):
        read_history(link)
    assert read_history(tmp_path / "absent.jsonl").points == []


def test_writer_cuts_a_torn_tail_then_appends_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(point(NOW, 1).to_line() + b'{"t": 17000')  # a crash mid-write
    writer = HistoryWriter(tmp_path)
    writer.open()
    writer.append(point(NOW + 10, 2, pid=9))
    read = read_history(path)
    assert read.bad == 0
    assert [(p.tokens, p.pid) for p in read.points] == [(1, 7), (2, 9)]


def test_writer_is_due_on_its_pace_and_at_once_on_a_new_state(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path)
    writer.open()
    assert writer.due(point(NOW))
    writer.append(point(NOW))
    assert not writer.due(point(NOW + HISTORY_EVERY_S / 2))
    assert writer.due(point(NOW + HISTORY_EVERY_S / 2, state="done"))
    assert writer.due(point(NOW + HISTORY_EVERY_S))


def test_writer_compacts_past_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "HISTORY_COMPACT_BYTES", 20_000)
    writer = HistoryWriter(tmp_path)
    writer.open()
    start = NOW - 3 * 86400
    for i in range(3 * 86400 // 60):  # three days, a point a minute
        writer.append(point(start + i * 60, i))
    size = os.path.getsize(writer.path)
    assert size <= 20_000 + 200
    read = read_history(writer.path)
    assert read.bad == 0
    assert read.points[0].tokens == 0, "the start of the timeline survives compaction"
    assert read.points[-1].tokens == 3 * 86400 // 60 - 1
    assert read.points == sorted(read.points, key=lambda p: p.t)
