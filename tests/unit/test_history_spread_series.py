"""What the plot view makes of points picked across a whole history file: each bad line named
by its own line number, nothing called missing when the whole span came, and the summary
saying how many points the shown ones stand for."""

from __future__ import annotations

from gen_tui.backends.store.history import HistoryPoint
from gen_tui.backends.store.history_series import DatasetHistory, summary
from gen_tui.backends.store.tails import Tail

T0 = 1_700_000_000.0


def line(t: float, tokens: int) -> str:
    return HistoryPoint(t, 1, "active", tokens, tokens, 10.0, 2, 0).to_line().decode()[:-1]


def spread_report(lines: list[str], numbers: list[int], start: int = 0) -> dict:
    return {
        "type": "tail",
        "lines": lines,
        "numbers": numbers,
        "size": 10**6,
        "cut": False,
        "start": start,
        "total": 5000,
        "path": "out/A/history.jsonl",
    }


def test_points_spread_over_the_file_are_whole_and_bad_lines_keep_their_numbers() -> None:
    report = spread_report([line(T0, 1), "not json", line(T0 + 7 * 3600, 9)], [1, 2500, 5000])
    tail = Tail.parse(report, 1000)
    assert tail.numbers == (1, 2500, 5000) and tail.total == 5000
    history = DatasetHistory.of_tail("A", tail)
    assert [p.tokens for p in history.points] == [1, 9]
    assert not history.partial, "the file's size is more than was sent, yet its span all came"
    assert history.problems == ("out/A/history.jsonl:2500: not JSON",)
    said = summary(history, None)
    assert "2 of 5,000 points over 7.0 h" in said and "not fetched" not in said


def test_a_huge_file_read_from_past_its_start_says_older_points_were_not_fetched() -> None:
    tail = Tail.parse(spread_report([line(T0, 1), line(T0 + 60, 2)], [1, 5000], 4096), 1000)
    history = DatasetHistory.of_tail("A", tail)
    assert history.partial and "older points not fetched" in summary(history, None)


def test_numbers_that_do_not_match_the_lines_are_not_trusted() -> None:
    tail = Tail.parse(spread_report([line(T0, 1), "x"], [1, 2, 3]), 1000)
    assert tail.numbers == ()
    assert DatasetHistory.of_tail("A", tail).problems == ("out/A/history.jsonl:2: not JSON",)
