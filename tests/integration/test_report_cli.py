"""`gen-tui report` on a real finished run, as a user runs it: figures that match an
independent recount, and one page that parses."""

from __future__ import annotations

import json
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.records import read_records, recount
from tests.support.run_output import copy_run, gen_tui


@pytest.mark.quick
def test_report_of_a_finished_run(finished_run: tuple[Path, Path], tmp_path: Path) -> None:
    out = copy_run(finished_run, tmp_path)
    with open(out / "A" / "raw_responses.jsonl", "ab") as handle:
        handle.write(b'{"sample_id": "x", "completion_tokens": -1}\n')
    page = tmp_path / "site" / "report.html"
    done = gen_tui("report", "--output-dir", str(out), "--html", str(page))
    assert done.returncode == 0, done.stderr.decode()
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    lines = stdout.splitlines()
    assert lines[0].split()[:3] == ["dataset", "tokens", "samples"]
    rows = {line.split()[0]: line.split() for line in lines[1:3]}
    assert set(rows) == {"A", "B"}
    for name, row in rows.items():
        records = [r for r in read_records(out / name) if r["completion_tokens"] >= 0]
        _, count = recount(finished_run[0] / name)
        assert row[2] == f"{count:,}"
        cut = sum(r["finish_reason"] == "length" for r in records) / len(records)
        assert row[6] == f"{cut * 100:.1f}%"
        # The report's median is the lower middle value (rank n/2 of its histogram, whose
        # bins are 2.3% wide), shown to 0.01 s: not the mean of the two middle values, which
        # a loaded machine's gap between them moved (0.034 against a shown 0.02).
        median = statistics.median_low(r["latency_s"] for r in records)
        assert abs(float(row[7].rstrip("s")) - median) <= 0.025 * median + 0.005
    assert f"{out / 'A' / 'raw_responses.jsonl'}:" in stderr
    assert "'completion_tokens' must be a non-negative integer" in stderr
    assert f"wrote {page}" in stderr
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 4
    for start in range(html.count("<svg")):
        at = [i for i in range(len(html)) if html.startswith("<svg", i)][start]
        ET.fromstring(html[at : html.index("</svg>", at) + 6])
    history = [json.loads(x) for x in (out / "A" / "history.jsonl").read_text().splitlines()]
    assert history[-1]["state"] == "exhausted"


def test_report_html_given_a_folder_names_the_folder(tmp_path: Path) -> None:
    """Issue 31, defect 15: `--html /tmp` is refused naming /tmp, not a temporary file."""
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    folder = tmp_path / "pages"
    folder.mkdir()
    done = gen_tui("report", "--output-dir", str(out), "--html", str(folder))
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert f"--html {folder} is a folder" in stderr and ".tmp" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert list(folder.iterdir()) == []
