"""The watcher's log tail (`--tail` without `whole`): a long line costs its head, not the
byte cap, so the lines before it still come (issue 30, point 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.backends.watcher import tails


def _tail(tmp_path: Path, data: bytes, lines: int = 20, cap: int = 64 << 10) -> dict:
    path = tmp_path / "run.log"
    path.write_bytes(data)
    return tails.tail(str(path), lines, cap)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", []),
        (b"\n", [""]),
        (b"a\nb\n", ["a", "b"]),
        (b"a\nb", ["a", "b"]),
        (b"a\n\nb\n\n", ["a", "", "b", ""]),
    ],
)
def test_short_logs_read_as_a_plain_tail(tmp_path: Path, data: bytes, expected: list) -> None:
    report = _tail(tmp_path, data)
    assert report["lines"] == expected and not report["cut"]


@pytest.mark.parametrize("ending", [b"", b"\n"])
def test_a_3_mb_last_line_is_cut_with_its_size_and_earlier_lines_kept(
    tmp_path: Path, ending: bytes
) -> None:
    report = _tail(tmp_path, b"one\ntwo\n" + b"y" * 3_000_000 + ending)
    one, two, last = report["lines"]
    assert (one, two) == ("one", "two")
    assert last == "y" * tails.LONG_HEAD + "\u2026 (cut: the line is 3,000,000 bytes)"


def test_a_line_past_the_scan_is_shown_by_its_end_and_cut(tmp_path: Path) -> None:
    report = _tail(tmp_path, b"one\n" + b"z" * (tails.TAIL_SCAN_BYTES + 5))
    (only,) = report["lines"]
    assert only.startswith("(cut: a line of over 16,777,216 bytes, its end:) \u2026zzz")
    assert len(only) < tails.LONG_HEAD + 80 and report["cut"]


def test_the_cap_and_the_count_still_bound_the_lines(tmp_path: Path) -> None:
    many = b"".join(b"%04d\n" % n for n in range(3000))
    assert _tail(tmp_path, many, 5)["lines"] == ["2995", "2996", "2997", "2998", "2999"]
    wide = b"".join(b"x" * 999 + b"\n" for _ in range(100))
    report = _tail(tmp_path, wide, 100, 10_000)
    assert len(report["lines"]) == 10 and report["cut"]
