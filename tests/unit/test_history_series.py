"""What the plot view makes of a history's end: points from fetched lines (bad ones said),
whether older points were left behind, the time axis, the ticks and the summary line."""

from __future__ import annotations

from gen_tui.backends.store.history import HistoryPoint, parse_history_lines
from gen_tui.backends.store.history_series import DatasetHistory, TimeAxis, count_ticks, summary
from gen_tui.backends.store.tails import Tail

T0 = 1_700_000_000.0


def line(t: float, tokens: int, pid: int = 1, state: str = "active", tok_s: float = 10.0) -> str:
    return HistoryPoint(t, pid, state, tokens, tokens // 10, tok_s, 2, 0).to_line().decode()[:-1]


def test_fetched_lines_become_points_and_bad_ones_are_named_by_line() -> None:
    read = parse_history_lines(
        [line(T0, 5), "not json", '{"t": 1}', line(T0 + 5, 9), "x" * 5000], "h.jsonl", 10
    )
    assert [p.tokens for p in read.points] == [5, 9]
    assert read.bad == 3
    assert read.problems[0] == "h.jsonl:11: not JSON"
    assert read.problems[1] == "h.jsonl:12: field 'pid' is missing or of the wrong type"
    assert read.problems[2] == "h.jsonl:14: a line of 5000 bytes"


def test_a_tail_short_of_the_file_says_older_points_were_not_fetched() -> None:
    lines = (line(T0, 5), line(T0 + 5, 9))
    whole = sum(len(x) + 1 for x in lines)
    assert not DatasetHistory.of_tail("A", Tail(lines, "p", whole)).partial
    cut = DatasetHistory.of_tail("A", Tail(lines, "p", whole + 100))
    assert cut.partial and "older points not fetched" in summary(cut, None)
    failed = DatasetHistory.of_tail("A", Tail(error="link down\x1b[2J"))
    said = summary(failed, 10)
    assert said.startswith("A: no history to show: link down") and "\x1b" not in said


def point(
    t: float, tokens: int = 0, pid: int = 1, state: str = "active", tok_s: float = 0.0
) -> HistoryPoint:
    return HistoryPoint(t, pid, state, tokens, tokens // 10, tok_s, 2, 0)


def test_the_axis_unit_follows_the_span() -> None:
    def axis(span: float) -> TimeAxis:
        return TimeAxis.over([DatasetHistory("A", (point(T0), point(T0 + span)))])

    assert (axis(100).unit, axis(1000).unit, axis(4 * 3600).unit) == ("s", "min", "h")
    assert axis(1000).x(point(T0 + 600)) == 10.0


def test_ticks_are_round_and_the_budget_replaces_a_tick_too_near_it() -> None:
    assert count_ticks(1_000_000) == (
        [0, 250_000, 500_000, 750_000, 1_000_000],
        ["0", "250k", "500k", "750k", "1M"],
    )
    values, labels = count_ticks(3026, budget=3000)
    assert labels[-1] == "budget 3k" and values[-1] == 3000
    assert "3k" not in labels[:-1], "the round 3k tick gave way to the budget's"


def test_summary_names_the_last_figures_budget_runs_and_state() -> None:
    history = DatasetHistory(
        "A",
        (
            point(T0, 0),
            point(T0 + 3600, 1_000_000, tok_s=300.0),
            point(T0 + 7200, 1_500_000, 2, "done"),
        ),
    )
    text = summary(history, 2_000_000)
    assert text == (
        "A: 1.5M tokens of 2M budget · 150,000 samples · last 0 tok/s, peak 300 tok/s"
        " · 3 points over 2.0 h · 2 runs · done"
    )
    assert "no token budget" in summary(history, None)


def test_the_all_view_legend_names_every_dataset_in_its_colour() -> None:
    """Nine datasets fit in a few lines at 80 columns, each with a swatch in its plot's colour
    (the view used to show eight summaries and drop the ninth, with no colour key)."""
    from gen_tui.widgets.history_plot import COLORS, legend

    histories = [
        DatasetHistory(f"B{i}_dataset", points=(point(1.0, tokens=i * 1000),)) for i in range(1, 10)
    ]
    text = legend(histories, 78)
    lines = text.plain.splitlines()
    assert len(lines) <= 4 and all(len(line) <= 78 for line in lines), lines
    for i in range(1, 10):
        assert f"■ B{i}_dataset {i}k" in text.plain
    swatches = [span for span in text.spans if span.end - span.start == 2]
    assert [str(span.style) for span in swatches[:2]] == [COLORS[0], "dark_orange"]
    assert str(swatches[8].style) == COLORS[0]  # the ninth takes the first colour again
