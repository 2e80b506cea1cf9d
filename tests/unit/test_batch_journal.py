"""The batch journal (issue 33, step 3): a batch is on disk before it exists anywhere else,
and a restarted run reads back exactly the batches still open."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.backends.store.batch_journal import JOURNAL_FILE, BatchJournal, JournalError


def test_intent_then_id_then_close_read_back(tmp_path: Path) -> None:
    journal = BatchJournal(tmp_path)
    assert journal.load() == []
    first = journal.open_batch(["a", "b"])
    journal.created(first, "batch_1")
    second = journal.open_batch(["c"])  # killed before its create answered: no id
    third = journal.open_batch(["d"])
    journal.created(third, "batch_3")
    journal.close(third, "completed")

    again = BatchJournal(tmp_path)
    assert again.load() == []
    assert list(again.open) == [first.key, second.key]
    assert again.open[first.key].batch_id == "batch_1"
    assert again.open[second.key].batch_id is None
    assert again.pending == {"a", "b", "c"}  # d's batch is closed: d is free


def test_a_sample_is_in_one_open_batch_at_most(tmp_path: Path) -> None:
    journal = BatchJournal(tmp_path)
    journal.open_batch(["a", "b"])
    with pytest.raises(JournalError, match="already in an open batch"):
        journal.open_batch(["b", "c"])
    assert BatchJournal(tmp_path).load() == [] and len(journal.open) == 1


def test_a_torn_last_line_is_skipped_and_said(tmp_path: Path) -> None:
    journal = BatchJournal(tmp_path)
    kept = journal.open_batch(["a"])
    with (tmp_path / JOURNAL_FILE).open("ab") as handle:
        handle.write(b'{"intent": "x", "samples": ["b"')  # the crash came mid-write
    again = BatchJournal(tmp_path)
    problems = again.load()
    assert len(problems) == 1 and "torn last line" in problems[0]
    assert list(again.open) == [kept.key] and again.pending == {"a"}


def test_a_damaged_middle_line_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_FILE).write_bytes(b'{"intent": 5}\n{"closed": "x"}\n')
    with pytest.raises(JournalError, match=r"batches.jsonl line 1: an intent needs"):
        BatchJournal(tmp_path).load()


def test_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / JOURNAL_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(JournalError):
        BatchJournal(tmp_path).load()
    with pytest.raises(JournalError):
        BatchJournal(tmp_path).open_batch(["a"])
