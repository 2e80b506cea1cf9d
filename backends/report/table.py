"""The report's summary columns, as text: one definition for the terminal and the HTML page."""

from __future__ import annotations

from gen_tui.backends.figures import format_count, format_dollars, format_duration
from gen_tui.backends.report.summary import DatasetReport

COLUMNS = (
    "dataset",
    "tokens",
    "samples",
    "wall",
    "tok/s",
    "mean len",
    "truncated",
    "p50 lat",
    "p99 lat",
    "errors",
    "cost",
    "overshoot",
)


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}s" if value < 10 else f"{value:.0f}s"


def _percent(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value * 100:+.2f}%" if sign else f"{value * 100:.1f}%"


def cells(report: DatasetReport) -> list[str]:
    """The row of `report` under COLUMNS ("-" where its files do not say)."""
    budget = f"/{format_count(report.budget)}" if report.budget else ""
    return [
        report.name,
        f"{format_count(report.tokens)}{budget}",
        f"{report.samples:,}",
        format_duration(report.wall_s),
        format_count(report.tok_s) if report.tok_s is not None else "-",
        f"{report.mean_length:,.0f}" if report.mean_length is not None else "-",
        _percent(report.truncated_share),
        _seconds(report.latency.quantile(0.5)),
        _seconds(report.latency.quantile(0.99)),
        f"{report.errors:,}",
        format_dollars(report.cost) if report.cost is not None else "-",
        _percent(report.overshoot, sign=True),
    ]


def conversations(report: DatasetReport) -> str | None:
    """With `--turns all`: the dataset's conversations and turns in one line (None for a
    dataset of single answers)."""
    if not report.turn_records:
        return None
    per_conversation = report.turns_per_conversation
    per_turn = report.tokens_per_turn
    return (
        f"{report.name}: {report.conversations_begun:,} conversations begun, "
        f"{report.conversations_done:,} finished; {report.turn_records:,} turns, "
        + (f"{per_conversation:.1f} per finished conversation, " if per_conversation else "")
        + (f"{per_turn:,.0f} tokens per turn" if per_turn is not None else "")
    )


def text_table(reports: list[DatasetReport]) -> list[str]:
    """The summary as aligned plain lines (dataset names are checked names, no markup)."""
    rows = [list(COLUMNS), *(cells(report) for report in reports)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
