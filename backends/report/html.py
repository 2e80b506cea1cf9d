"""`gen-tui report --html`: one self-contained page a person would rather look at than read.

No script, no stylesheet or font from the network: the plots are SVG drawn here, inline.
Every text that came from the run's files (dataset names, error reasons, paths) goes
through `html.escape`, so a name like `<script>` stays text, in the table and in the SVGs.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from gen_tui.backends.axes import clock_ticks, ticks_past
from gen_tui.backends.figures import format_count
from gen_tui.backends.report.summary import LENGTH_BIN, DatasetReport
from gen_tui.backends.report.table import COLUMNS, cells, conversations

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f")
WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 16, 34
HISTOGRAM_BARS = 32
HIST_WIDTH, HIST_HEIGHT = 340, 170

Series = tuple[str, list[list[tuple[float, float]]]]
"""(name, segments of (x, y) points): a new segment where a run ended and another began."""

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}
.note{color:#666}.problems{color:#a33}
.hists{display:flex;flex-wrap:wrap;gap:1em}
svg text{font:11px system-ui,sans-serif;fill:#444}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _time_label(t: float, span: float) -> str:
    return time.strftime("%m-%d %H:%M" if span > 86400 else "%H:%M:%S", time.localtime(t))


def line_chart(
    title: str, series: Sequence[Series], y_unit: str, budgets: Sequence[int | None] = ()
) -> str:
    """An SVG of each series over wall time, with a legend naming them; `budgets` (one per
    series, or none) are drawn as dashed lines in the series' colour, so a reader sees
    where each dataset was to stop beside where it did."""
    points = [p for _, segments in series for segment in segments for p in segment]
    if not points:
        return f'<p class="note">{_e(title)}: no history yet.</p>'
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    top = max([p[1] for p in points] + [float(b) for b in budgets if b])
    y_ticks = ticks_past(max(top, 1.0))
    y1 = y_ticks[-1]
    span = max(x1 - x0, 1e-9)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / span * plot_w

    def sy(y: float) -> float:
        return TOP + plot_h - y / y1 * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{_e(title)}">',
        f"<title>{_e(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#ccc"/>',
    ]
    for y in y_ticks:
        parts.append(
            f'<text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">'
            f"{_e(format_count(y))}</text>"
        )
    for x in clock_ticks(x0, x1):
        parts.append(
            f'<text x="{sx(x):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
            f"{_e(_time_label(x, span))}</text>"
        )
    parts.append(f'<text x="{LEFT}" y="{TOP - 4}">{_e(y_unit)}</text>')
    for index, (name, segments) in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        path = " ".join(
            "M" + " L".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in segment)
            for segment in segments
            if segment
        )
        if path:
            parts.append(
                f'<path d="{path}" fill="none" stroke="{color}" stroke-width="1.6">'
                f"<title>{_e(name)}</title></path>"
            )
        budget = budgets[index] if index < len(budgets) else None
        if budget:
            parts.append(
                f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{sy(budget):.1f}" '
                f'y2="{sy(budget):.1f}" stroke="{color}" stroke-dasharray="5,4">'
                f"<title>{_e(name)} budget {_e(format_count(budget))}</title></line>"
            )
        legend_y = TOP + 14 * index + 8
        parts.append(
            f'<rect x="{WIDTH - RIGHT + 10}" y="{legend_y - 8}" width="10" height="10" '
            f'fill="{color}"/><text x="{WIDTH - RIGHT + 24}" y="{legend_y + 1}">'
            f"{_e(name[:22])}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _segments(report: DatasetReport, value: str) -> list[list[tuple[float, float]]]:
    """The history's points as (t, value) runs, split where one run ended and another began."""
    segments: list[list[tuple[float, float]]] = []
    pid = None
    for point in report.history:
        if point.pid != pid:
            segments.append([])
            pid = point.pid
        segments[-1].append((point.t, float(getattr(point, value))))
    return segments


def histogram(report: DatasetReport, color: str) -> str:
    """An SVG bar chart of the dataset's answer lengths, in about HISTOGRAM_BARS bars."""
    title = f"{report.name}: answer lengths"
    if not report.lengths:
        return f'<p class="note">{_e(title)}: no answers.</p>'
    top_bin = max(report.lengths)
    per_bar = max(1, -(-(top_bin + 1) // HISTOGRAM_BARS))
    bars = [0] * (top_bin // per_bar + 1)
    for bin_index, count in report.lengths.items():
        bars[bin_index // per_bar] += count
    tallest = max(bars)
    plot_w, plot_h = HIST_WIDTH - 50, HIST_HEIGHT - 50
    bar_w = plot_w / len(bars)
    width_tokens = per_bar * LENGTH_BIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{HIST_WIDTH}" height="{HIST_HEIGHT}" '
        f'viewBox="0 0 {HIST_WIDTH} {HIST_HEIGHT}" role="img" aria-label="{_e(title)}">',
        f"<title>{_e(title)}</title>",
        f'<text x="10" y="14">{_e(report.name[:40])} · tokens per answer</text>',
    ]
    for index, count in enumerate(bars):
        h = count / tallest * plot_h
        low = index * width_tokens
        parts.append(
            f'<rect x="{40 + index * bar_w:.1f}" y="{24 + plot_h - h:.1f}" '
            f'width="{max(bar_w - 1, 0.5):.1f}" height="{h:.1f}" fill="{color}">'
            f"<title>{low}–{low + width_tokens - 1} tokens: {count}</title></rect>"
        )
    parts.append(
        f'<text x="40" y="{HIST_HEIGHT - 10}">0</text>'
        f'<text x="{40 + plot_w}" y="{HIST_HEIGHT - 10}" text-anchor="end">'
        f"{_e(format_count(len(bars) * width_tokens))}</text>"
        f'<text x="36" y="30" text-anchor="end">{_e(format_count(tallest))}</text></svg>'
    )
    return "".join(parts)


def _table(reports: Sequence[DatasetReport]) -> str:
    head = "".join(f"<th>{_e(name)}</th>" for name in COLUMNS)
    rows = "".join(
        "<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in cells(report)) + "</tr>"
        for report in reports
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _conversations(reports: Sequence[DatasetReport]) -> str:
    """With `--turns all`: each dataset's conversations and turns (nothing otherwise)."""
    items = [f"<li>{_e(said)}</li>" for r in reports if (said := conversations(r)) is not None]
    return f"<h2>Conversations</h2><ul>{''.join(items)}</ul>" if items else ""


def _problems(reports: Sequence[DatasetReport]) -> str:
    items = []
    for report in reports:
        for reason, count in report.reasons.most_common(3):
            items.append(f"<li>{_e(report.name)}: {count:,} × {_e(reason)}</li>")
    errors = f"<h2>Top error reasons</h2><ul>{''.join(items)}</ul>" if items else ""
    bad = [f"<li>{_e(problem)}</li>" for report in reports for problem in report.problems]
    lines = sum(report.bad_lines for report in reports)
    if bad or lines:
        errors += f'<h2>Unreadable lines ({lines:,})</h2><ul class="problems">{"".join(bad)}</ul>'
    return errors


def render(reports: Sequence[DatasetReport], source: str, now: float | None = None) -> str:
    """The whole page for `reports` of the run in `source` (its output folder)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    tokens = [(r.name, _segments(r, "tokens")) for r in reports]
    rates = [(r.name, _segments(r, "tok_s")) for r in reports]
    hists = "".join(
        histogram(report, PALETTE[index % len(PALETTE)]) for index, report in enumerate(reports)
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>gen-tui report: {_e(source)}</title><style>{_STYLE}</style></head><body>"
        f'<h1>gen-tui report</h1><p class="note">{_e(source)} · made {_e(stamp)}</p>'
        f"<h2>Summary</h2>{_table(reports)}{_conversations(reports)}"
        "<h2>Tokens over time</h2>"
        f"{line_chart('tokens over time', tokens, 'tokens', [r.budget for r in reports])}"
        f"<h2>Throughput</h2>{line_chart('throughput', rates, 'tok/s')}"
        f'<h2>Answer lengths</h2><div class="hists">{hists}</div>'
        f"{_problems(reports)}</body></html>\n"
    )
