"""Data-quality figures: counted per answer, bounded whatever the run, read back tolerantly;
the prompts-run-out forecast; the prompt file's line count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gen_tui.app.dialogs.modals import ResumeTarget, resume_preview
from gen_tui.backends.budget.rules import runs_out_at
from gen_tui.backends.progress.quality import (
    LATENCY_EDGES,
    LENGTH_EDGES,
    MAX_ERROR_KINDS,
    MAX_REASONS,
    OTHER,
    REASON_CHARS,
    TOP_ERRORS,
    Quality,
    QualityWatch,
    length_label,
)
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.store.prompts import count_lines


def test_answers_fill_the_reason_mix_the_length_buckets_and_the_latency_quantiles() -> None:
    watch = QualityWatch()
    for tokens in range(1, 101):  # latencies 0.1 .. 10 s
        watch.answer(tokens * 10, "length" if tokens % 10 == 0 else "stop", tokens / 10)
    quality = watch.published()
    assert quality.answers == 100
    assert dict(quality.finish) == {"stop": 90, "length": 10}
    assert quality.finish[0] == ("stop", 90)  # most frequent first
    assert sum(quality.lengths) == 100 and len(quality.lengths) == len(LENGTH_EDGES) + 1
    # 10..63 -> bucket 0 (6 answers: 10..60), 64..127 -> bucket 1 (70..120: 6 answers)
    assert quality.lengths[0] == 6 and quality.lengths[1] == 6
    p50, p99 = quality.latency_quantile(0.5), quality.latency_quantile(0.99)
    assert p50 is not None and p99 is not None
    assert 5.0 <= p50 <= 5.0 * 1.25 and 9.9 <= p99 <= 10.0 * 1.25  # within a bucket's width
    assert watch.published() is quality, "unchanged figures are the same object"


def test_reasons_and_errors_stay_bounded_whatever_the_servers_say() -> None:
    watch = QualityWatch()
    for index in range(500):
        watch.answer(10, f"weird-{index}", None)
        watch.error(f"HTTP 500: body {index} " + "x" * 500)
    quality = watch.published()
    assert len(quality.finish) <= MAX_REASONS + 1
    assert dict(quality.finish)[OTHER] == 500 - MAX_REASONS
    assert len(watch.errors) <= MAX_ERROR_KINDS + 1
    assert len(quality.errors) == TOP_ERRORS
    assert all(len(reason) <= REASON_CHARS + 40 for reason, _ in quality.errors)
    assert quality.latency == (), "no latency reported, no latency histogram"
    payload = json.dumps({"quality": quality.to_json()})
    assert len(payload) < 4000, "a progress.json stays small"


def test_a_server_reason_with_escapes_is_kept_as_visible_text() -> None:
    watch = QualityWatch()
    watch.answer(5, "stop\x1b]52;c;aGk=\x07", 1.0)
    watch.error("bad\x1b[2J\nthing")
    quality = watch.published()
    assert all("\x1b" not in reason and "\n" not in reason for reason, _ in quality.finish)
    assert all("\x1b" not in reason for reason, _ in quality.errors)


def test_progress_json_round_trips_the_figures_and_drops_odd_fields_alone() -> None:
    watch = QualityWatch()
    for tokens in (50, 700, 5000):
        watch.answer(tokens, "stop", 2.0)
    watch.error("timeout")
    quality = watch.published()
    parsed = ProgressFile.parse({"quality": quality.to_json(), "prompts_left": 12, "errors": 1})
    assert parsed is not None
    assert parsed.quality == quality and parsed.prompts_left == 12 and parsed.errors == 1
    odd = {
        "answers": -1,
        "finish": [["stop", 3], ["x"], [1, 2], ["y", -4], "z"],
        "lengths": [1, 2],  # the wrong number of buckets
        "latency": ["a"] * (len(LATENCY_EDGES) + 1),
        "errors": {"not": "a list"},
    }
    parsed = ProgressFile.parse({"quality": odd, "prompts_left": -3, "errors": 2})
    assert parsed is not None and parsed.errors == 2
    assert parsed.quality == Quality(answers=0, finish=(("stop", 3),))
    assert parsed.prompts_left is None and "prompts_left" in parsed.ignored
    bad = ProgressFile.parse({"quality": [1, 2], "errors": 2})
    assert bad is not None and bad.quality is None and "quality" in bad.ignored


def test_length_labels_name_their_ranges() -> None:
    assert length_label(0) == "<64"
    assert length_label(5) == "1k-2k"
    assert length_label(len(LENGTH_EDGES)) == "≥32k"


@pytest.mark.parametrize(
    ("tokens", "budget", "left", "mean", "expected"),
    [
        (1_000, 10_000, 5, 100.0, 1_500),  # 5 x 100 short of 9,000 to go: out at 1,500
        (1_000, 10_000, 500, 100.0, None),  # enough prompts for the budget
        (1_000, None, 5, 100.0, None),  # no token budget: nothing to run out before
        (1_000, 10_000, None, 100.0, None),  # prompts left unknown
        (1_000, 10_000, 5, None, None),  # no mean yet
        (10_000, 10_000, 0, 100.0, None),  # already at its budget
    ],
)
def test_runs_out_at(
    tokens: int, budget: int | None, left: int | None, mean: float | None, expected: int | None
) -> None:
    assert runs_out_at(tokens, budget, left, mean) == expected


def test_the_resume_preview_times_a_budget_the_prompts_cannot_reach() -> None:
    target = ResumeTarget(
        "B2", 1_000_000, 1_000_000, None, 5000.0, False, prompts_left=100, mean_tokens=1000.0
    )
    preview = resume_preview(target, 3_000_000)
    assert "prompts run out at ~1.1M" in preview and "100 left" in preview
    assert "100k to go" in preview and "about 20s" in preview  # 100k at 5k tok/s, not 2M
    plenty = resume_preview(target, 1_050_000)
    assert "run out" not in plenty and "50k to go" in plenty


@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 20])
def test_count_lines_counts_non_empty_lines_across_chunks(tmp_path: Path, chunk: int) -> None:
    cases = {
        b"": 0,
        b"a": 1,
        b"a\n": 1,
        b"a\n\nb": 2,
        b"\n\na\nb\n\n": 2,
        b"a\n\n\n\nb\n": 2,
        b"\n\n\n": 0,
        b'{"x": 1}\n{"y": 2}\n{"z": 3}': 3,
    }
    for index, (data, expected) in enumerate(cases.items()):
        path = tmp_path / f"{index}.jsonl"
        path.write_bytes(data)
        assert count_lines(path, chunk=chunk) == expected, data


def test_the_resume_preview_of_a_stopped_dataset_uses_its_last_runs_rate() -> None:
    """Issue 31, point 19: "no rate yet" for a dataset that had just run at 52k tok/s."""
    from dataclasses import replace

    from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, run_rate

    done = DatasetSnapshot(
        name="B2", state=DatasetState.DONE, tokens=1_040_000, samples=280, max_tokens=1_000_000,
        max_samples=None, budget_mode="predictive", inflight=0, errors=0, malformed=0,
        mean_tokens=3714.0, tok_s=0.0, samples_s=0.0, eta_s=None, resumed_tokens=0,
        resumed_samples=0, started_at=1000.0, updated_at=1021.0, last_record_at=1020.0,
        pid=1, host="vm",
    )  # fmt: skip
    assert run_rate(done) == 52_000.0  # its 1.04M tokens over its 20 s
    assert run_rate(replace(done, resumed_tokens=1_040_000)) == 0.0  # nothing of its own
    target = ResumeTarget("B2", done.tokens, done.max_tokens, None, 0.0, False)
    assert "no rate yet" in resume_preview(target, 2_080_000)
    preview = resume_preview(replace(target, last_tok_s=run_rate(done)), 2_080_000)
    assert preview == "1.04M to go, about 20s at its last run's 52k tok/s", preview
