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


def _fill(journal: BatchJournal, closed: int) -> list[str]:
    """`closed` batches opened, given ids and closed, and two left open; their keys."""
    for n in range(closed):
        batch = journal.open_batch([f"done{n}"])
        journal.created(batch, f"batch_done{n}")
        journal.close(batch, "completed")
    kept = journal.open_batch(["x", "y"])
    journal.created(kept, "batch_x")
    fresh = journal.open_batch(["z"])  # an intent without its id yet
    return [kept.key, fresh.key]


def test_a_journal_past_its_threshold_keeps_only_its_open_batches_and_a_summary(
    tmp_path: Path,
) -> None:
    journal = BatchJournal(tmp_path, compact_after=4)
    keys = _fill(journal, 3)
    assert len((tmp_path / JOURNAL_FILE).read_bytes().splitlines()) == 3 * 3 + 3
    last = journal.open_batch(["w"])
    journal.created(last, "batch_w")
    assert journal.close(last, "completed") is None  # the 4th close: compacted
    lines = (tmp_path / JOURNAL_FILE).read_bytes().splitlines()
    assert len(lines) == 1 + 3 and b'"summary":{"closed":4' in lines[0]
    again = BatchJournal(tmp_path)
    assert again.load() == []
    assert list(again.open) == keys and again.closed == 4
    assert again.open[keys[0]].batch_id == "batch_x" and again.open[keys[1]].batch_id is None
    assert again.pending == {"x", "y", "z"}
    # And on: new lines after the summary, a second compaction counts both.
    for n in range(4):
        batch = again.open_batch([f"more{n}"])
        again.close(batch, "completed")
    third = BatchJournal(tmp_path)
    third.load()
    assert third.closed == 8 and list(third.open) == keys


KILLED = """
import os, sys
from pathlib import Path
from gen_tui.backends.store.batch_journal import BatchJournal
journal = BatchJournal(Path(sys.argv[1]), compact_after=10**9)
journal.load()
def killed(*args):  # the new journal is written and fsynced: die before the rename
    os.kill(os.getpid(), 9)
os.replace = killed
journal.compact()
"""


def test_a_kill_between_the_write_and_the_rename_leaves_the_old_journal_whole(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    journal = BatchJournal(tmp_path, compact_after=10**9)
    keys = _fill(journal, 3)
    before = (tmp_path / JOURNAL_FILE).read_bytes()
    done = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path)], check=False)
    assert done.returncode == -9
    strays = list(tmp_path.glob(f".{JOURNAL_FILE}.*.tmp"))
    assert len(strays) == 1 and b'"summary"' in strays[0].read_bytes()  # written, not renamed
    assert (tmp_path / JOURNAL_FILE).read_bytes() == before
    again = BatchJournal(tmp_path)
    assert again.load() == []
    assert list(again.open) == keys and again.closed == 3
    assert not list(tmp_path.glob(f".{JOURNAL_FILE}.*.tmp"))  # the stray is gone
    again.compact()  # and the next compaction goes through
    third = BatchJournal(tmp_path)
    third.load()
    assert list(third.open) == keys and third.closed == 3


def test_a_compaction_that_cannot_write_is_said_and_the_journal_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = BatchJournal(tmp_path, compact_after=2)
    batch = journal.open_batch(["a"])
    journal.close(batch, "completed")
    before = (tmp_path / JOURNAL_FILE).read_bytes()

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", full)
    batch = journal.open_batch(["b"])
    said = journal.close(batch, "completed")
    assert said is not None and "cannot compact" in said and "No space left" in said
    assert "\n" not in said
    assert (tmp_path / JOURNAL_FILE).read_bytes().startswith(before)
    assert not list(tmp_path.glob(f".{JOURNAL_FILE}.*.tmp"))
    assert BatchJournal(tmp_path).load() == []
