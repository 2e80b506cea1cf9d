"""The report's figures from a dataset folder written by hand, and its page: valid, plotted,
and with every untrusted text escaped."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from gen_tui.backends.report import summarize
from gen_tui.backends.report.html import render
from gen_tui.backends.report.summary import LogHistogram
from gen_tui.backends.report.table import COLUMNS, cells, text_table
from gen_tui.backends.store.history import HistoryPoint

T0 = 1_800_000_000.0
HOSTILE = '<img src=x onerror="alert(1)">'


def write_folder(folder: Path) -> None:
    """100 records (lengths 10..109, latency = length/100 s, every tenth cut at its cap,
    1 cent each), two runs in the history, a 5,000-token budget, two failures."""
    folder.mkdir(parents=True)
    lines = []
    for i in range(100):
        record = {
            "sample_id": i,
            "completion_tokens": 10 + i,
            "finish_reason": "length" if i % 10 == 0 else "stop",
            "latency_s": (10 + i) / 100,
            "cost": 0.01,
            "created": T0 + i,
        }
        lines.append(json.dumps(record))
    lines.insert(50, "{torn")
    (folder / "raw_responses.jsonl").write_text("\n".join(lines) + "\n")
    history = [
        HistoryPoint(T0, 1, "active", 0, 0, 0.0, 4, 0),
        HistoryPoint(T0 + 100, 1, "active", 2000, 40, 20.0, 4, 0),
        # killed; resumed an hour later by pid 2
        HistoryPoint(T0 + 3700, 2, "active", 2000, 40, 0.0, 4, 0),
        HistoryPoint(T0 + 3800, 2, "done", 5950, 100, 39.5, 0, 0),
    ]
    (folder / "history.jsonl").write_bytes(b"".join(p.to_line() for p in history) + b"[1]\n")
    (folder / "progress.json").write_text(json.dumps({"state": "done", "max_tokens": 5000}))
    errors = [{"sample_id": 7, "reason": f"HTTP 500 {HOSTILE}\x1b[31m", "attempts": 3}] * 2
    (folder / "errors.jsonl").write_text("".join(json.dumps(e) + "\n" for e in errors))


def test_summary_figures(tmp_path: Path) -> None:
    folder = tmp_path / "out" / "B1"
    write_folder(folder)
    report = summarize(folder)
    assert (report.tokens, report.samples) == (sum(range(10, 110)), 100)
    assert report.truncated_share == 0.1
    assert abs(report.cost - 1.0) < 1e-9
    assert report.wall_s == 200.0, "the hour it lay killed is not wall time"
    assert report.tok_s == report.tokens / 200
    assert report.runs == 2
    assert report.overshoot == (5950 - 5000) / 5000
    p50, p99 = report.latency.quantile(0.5), report.latency.quantile(0.99)
    assert abs(p50 - 0.595) / 0.595 < 0.03 and abs(p99 - 1.08) / 1.08 < 0.03
    assert report.errors == 2 and sum(report.reasons.values()) == 2
    assert report.bad_lines == 2
    assert report.problems[0] == f"{folder / 'raw_responses.jsonl'}:51: not JSON"
    assert report.problems[1].startswith(f"{folder / 'history.jsonl'}:5: not a JSON object")
    row = dict(zip(COLUMNS, cells(report), strict=True))
    assert row["tokens"] == "5.95k/5k" and row["truncated"] == "10.0%"
    assert row["overshoot"] == "+19.00%" and row["cost"] == "$1.00" and row["wall"] == "3m20s"
    header, line = text_table([report])
    assert line.split()[:3] == ["B1", "5.95k/5k", "100"]
    assert len(header) == len(line), "columns aligned"


def test_log_histogram_quantiles_in_fixed_memory() -> None:
    histogram = LogHistogram()
    for i in range(1, 100_001):
        histogram.add(i / 1000)
    assert abs(histogram.quantile(0.5) - 50) / 50 < 0.015
    assert abs(histogram.quantile(0.99) - 99) / 99 < 0.015
    assert len(histogram.bins) < 600
    assert LogHistogram().quantile(0.5) is None


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []
        self.text: list[str] = []
        self.open: list[str] = []
        self.svg_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.links += [v or "" for k, v in attrs if k in ("src", "href")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_page_is_self_contained_plotted_and_escaped(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_folder(out / "B1")
    odd = out / HOSTILE
    write_folder(odd)
    page = render([summarize(out / "B1"), summarize(odd)], str(out))
    parser = Page()
    parser.feed(page)
    parser.close()
    assert "script" not in parser.tags and "img" not in parser.tags
    assert parser.links == [], "the page must need nothing from the network"
    text = "".join(parser.text)
    assert HOSTILE in text, "the hostile name is shown, as text"
    assert "\x1b" not in page, "no terminal escape reaches the page"
    svgs = [page[start : page.index("</svg>", start) + 6] for start in _starts(page, "<svg")]
    assert len(svgs) == 4, "tokens, throughput, and one length histogram per dataset"
    for svg in svgs:
        root = ET.fromstring(svg)  # well-formed XML, as a browser's SVG parser needs
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    tokens = ET.fromstring(svgs[0])
    paths = tokens.findall("{http://www.w3.org/2000/svg}path")
    assert len(paths) == 2 and all(p.get("d", "").count("M") == 2 for p in paths), (
        "a line per dataset, broken where the run was killed"
    )
    bars = ET.fromstring(svgs[2]).findall("{http://www.w3.org/2000/svg}rect")
    assert (
        sum(int(b.find("{http://www.w3.org/2000/svg}title").text.rsplit(" ", 1)[1]) for b in bars)
        == 100
    )


def _starts(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def test_a_dataset_done_early_in_a_long_run_counts_its_working_time_only(tmp_path: Path) -> None:
    """Issue 31: B1, done in about 8 s at about 90k tok/s while the run went on for 77 s,
    read `wall 1m17s tok/s 10.13k`: the run kept writing its (done) points."""
    folder = tmp_path / "B1"
    folder.mkdir()
    history = [
        HistoryPoint(T0 + t, 1, "active", 90_000 * t, t * 9, 90_000.0, 128, 0) for t in range(9)
    ]
    history += [HistoryPoint(T0 + t, 1, "done", 720_000, 72, 0.0, 0, 0) for t in (8.5, 12, 77)]
    (folder / "history.jsonl").write_bytes(b"".join(p.to_line() for p in history))
    records = (json.dumps({"sample_id": i, "completion_tokens": 10_000}) for i in range(72))
    (folder / "raw_responses.jsonl").write_text("\n".join(records) + "\n")
    report = summarize(folder)
    assert report.wall_s == 8.5, "up to the first point that says done, not to the run's end"
    assert report.tok_s is not None and round(report.tok_s) == round(720_000 / 8.5)


def test_the_tokens_chart_draws_each_budget(tmp_path: Path) -> None:
    """The README's "B2 levelling off at its 10M budget line": a dashed line per dataset with
    a budget, in its colour, the axis tall enough to show it."""
    out = tmp_path / "out"
    write_folder(out / "B1")
    page = render([summarize(out / "B1")], str(out))
    svg = page[page.index("<svg") : page.index("</svg>") + 6]
    lines = ET.fromstring(svg).findall("{http://www.w3.org/2000/svg}line")
    assert len(lines) == 1 and lines[0].get("stroke-dasharray")
    assert "B1 budget 5k" in svg
