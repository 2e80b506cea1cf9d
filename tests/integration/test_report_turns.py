"""`gen-tui report` of a `--turns all` run (issue 35): the terminal and the HTML page count
the conversations (begun, finished), the turns, turns per conversation and tokens per turn,
each figure matching the record file; a run of single answers has no such line."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from bench.common import simulator
from tests.support.run_output import gen_tui
from tests.support.turns import TURN_MEAN, run_args, turn_records, write_conversations

pytestmark = pytest.mark.timeout(300)


def test_report_counts_conversations_and_turns(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    write_conversations(tmp_path / "prompts" / "chat.jsonl", 40)
    out = tmp_path / "out"
    with simulator(
        "--tokens-per-s", "4000", "--vocab-size", str(vocab_size),
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        # A budget that ends the run with some conversations begun and none left half done.
        done = gen_tui(*run_args(tmp_path / "prompts", out, url, tokenizer_dir, 6_000))
    assert done.returncode == 0, done.stderr.decode()
    records = turn_records(out)
    finished = [r for r in records if r["turn"] == r["turns"]]
    begun = {r["sample_id"] for r in records}
    tokens = sum(r["completion_tokens"] for r in records)
    assert 0 < len(begun) < 40
    expected = (
        f"chat: {len(begun):,} conversations begun, {len(finished):,} finished; "
        f"{len(records):,} turns, "
        f"{sum(r['turns'] for r in finished) / len(finished):.1f} per finished conversation, "
        f"{tokens / len(records):,.0f} tokens per turn"
    )
    page = tmp_path / "report.html"
    report = gen_tui("report", "--output-dir", str(out), "--html", str(page))
    assert report.returncode == 0, report.stderr.decode()
    assert expected in report.stdout.decode().splitlines()
    text = page.read_text()
    assert "<h2>Conversations</h2>" in text
    assert f"<li>{html.escape(expected)}</li>" in text


def test_a_run_of_single_answers_has_no_conversation_line(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    report = gen_tui("report", "--output-dir", str(finished_run[0]), "--html", str(page))
    assert report.returncode == 0, report.stderr.decode()
    assert "conversations begun" not in report.stdout.decode()
    assert "<h2>Conversations</h2>" not in page.read_text()
