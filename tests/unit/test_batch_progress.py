"""progress.json's `batches` (issue 33): written with their age, window and ETA, read back
field by field from a file that may be another version's or hostile, and said in one line
(the panel's) and in the kill dialog of a run on a host."""

from __future__ import annotations

from typing import Any

from gen_tui.app.host_links import kill_question
from gen_tui.backends.hosts import RunIdentity
from gen_tui.backends.progress.batches import (
    BATCH_WINDOW_S,
    MAX_BATCHES,
    BatchView,
    batches_line,
    cancel_note,
)
from gen_tui.backends.store.progress_file import ProgressFile

T0 = 1_700_000_000.0


def test_a_batch_is_written_with_its_age_window_and_eta_and_read_back_the_same() -> None:
    batch = BatchView("batch_1", "in_progress", 1_000, 0, 4_000, T0 - 3_600, T0 + 82_800)
    data = batch.to_json(T0)
    assert data["age_s"] == 3_600 and data["window_s"] == BATCH_WINDOW_S
    assert data["eta_s"] == 3 * 3_600  # a quarter done in an hour: three hours more
    parsed = ProgressFile.parse({"batches": [data], "cost_saved": 2.5})
    assert parsed is not None and parsed.batches == (batch,) and parsed.cost_saved == 2.5
    assert (
        batches_line(parsed.batches, T0)
        == "1 batch: in_progress 1,000/4,000 · 1h00m of 24h · ETA 3h00m"
    )


def test_no_eta_before_a_line_is_done_and_none_when_none_is_left() -> None:
    fresh = BatchView("b", "validating", 0, 0, 10, T0 - 5, None)
    assert fresh.eta_s(T0) is None and fresh.window_s == BATCH_WINDOW_S
    assert BatchView("b", "finalizing", 10, 0, 10, T0 - 5).eta_s(T0) is None
    assert BatchView("b", "creating", 0, 0, 10).age_s(T0) is None
    assert batches_line([], T0) == ""


def test_hostile_batches_cost_their_own_fields_only() -> None:
    value: dict[str, Any] = {
        "state": "active",
        "batches": [
            {"id": "batch_\x1b]52;c;evil\x07" + "x" * 500, "status": "in_progress\nFAKE",
             "completed": True, "total": 1e308, "failed": -4, "created_at": "yesterday"},
            {"id": 7, "status": "in_progress"},
            "not an object",
            {"id": "", "status": "x"},
        ] + [{"id": f"b{i}", "status": "s"} for i in range(MAX_BATCHES * 3)],
    }  # fmt: skip
    parsed = ProgressFile.parse(value)
    assert parsed is not None and parsed.state is not None and parsed.batches is not None
    first = parsed.batches[0]
    assert "\x1b" not in first.id and "\x07" not in first.id
    assert len(first.id) < 120  # cut, the cut said
    assert "\n" not in first.status
    assert (first.completed, first.total, first.failed, first.created_at) == (0, 0, 0, None)
    assert len(parsed.batches) < MAX_BATCHES  # the entries past the bound are not read
    wrong = ProgressFile.parse({"batches": {"id": "b"}, "cost_saved": "lots"})
    assert wrong is not None and wrong.batches is None and wrong.cost_saved is None
    assert set(wrong.ignored) == {"batches", "cost_saved"}


def test_the_kill_question_of_a_batch_run_says_what_is_cancelled_and_billed() -> None:
    identity = RunIdentity("gpu-box", 4242, T0, "boot", ("gen-tui", "run"))
    batches = [
        BatchView("batch_a", "in_progress", 1_200, 0, 5_000, T0 - 60),
        BatchView("batch_b", "validating", 0, 0, 5_000, T0 - 5),
    ]
    question = kill_question(identity, ["B1"], "-", 30.0, batches=batches)
    note = cancel_note(batches)
    assert question.endswith(note)
    assert "Its 2 batches in flight (1,200 of 10,000 requests done) are cancelled" in note
    assert "The provider bills the requests each finished before the cancel" in note
    assert cancel_note([]) == ""
    assert "batches" not in kill_question(identity, ["B1"], "-", 30.0)
