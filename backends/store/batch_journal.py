"""The batch journal (`batches.jsonl` in a dataset folder): which samples are in which batch.

Why a journal of its own: a batch is paid for when it is created and answered hours later,
so a run killed in between must find it again instead of sending its samples a second
time. Each batch is written here in three steps, each line flushed to disk before the step
it announces:

1. `{"intent": KEY, "samples": [...], "created": T}` before the batch is created at the
   provider (KEY also goes in the batch's metadata);
2. `{"batch": KEY, "id": ID}` once the provider has said its id;
3. `{"closed": KEY, "status": S}` once its answers are records (fsynced) and its unfinished
   samples given back.

A restarted run reads the journal: a batch with an id is polled and downloaded; an intent
without one is looked up by KEY among the provider's batches (the kill may have come
between the create and step 2), and only if the provider has none are its samples free
again. A sample is in one open batch at most (`open_batch` refuses another). A torn last
line (a crash mid-write) is skipped with one line saying so: whatever step it announced
had not begun, because each step starts only after its line is on disk.

Compaction: once `compact_after` closed batches are in the file, it is rewritten with only
its open batches (their intent and id lines) and one `{"summary": {"closed": N}}` line.
The new file is written beside it, fsynced, then renamed over it (and the folder fsynced):
a crash before the rename leaves the old journal whole (the stray temporary file is
removed by the next load), a crash after leaves the new one. Either says the same.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from gen_tui.backends.store.json_lines import json_lines
from gen_tui.backends.store.records import BadFile, open_private
from gen_tui.backends.untrusted import QUOTED_CHARS, one_line

JOURNAL_FILE = "batches.jsonl"
MAX_JOURNAL_BYTES = 1 << 30
"""The largest journal read: 20,000 batches of 50,000 sample ids (a line holds them all)."""
COMPACT_AFTER = 500
"""Closed batches in the journal before it is rewritten with only the open ones: a long
run's journal stays small, and each closed batch's sample ids are its records' already."""


class JournalError(Exception):
    """The journal cannot be used as it stands; the message names the file and the line."""


@dataclass
class OpenBatch:
    """A batch of this dataset that is not closed: its samples are nobody else's."""

    key: str
    samples: list[str]
    created: float
    batch_id: str | None = None
    """The provider's id; None while only the intent is written (or its id line was lost)."""


@dataclass
class JournalRead:
    """What a journal holds: its open batches in the order written, and the lines skipped."""

    open: dict[str, OpenBatch] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    closed: int = 0
    """Batches closed, the summary's included."""
    closed_lines: int = 0
    """Close lines in the file (what compaction would take out)."""


def _read(path: Path) -> JournalRead:
    found = JournalRead()
    try:
        # no symlink followed, and a FIFO planted by that name does not hang the open
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return found
    except OSError as exc:
        raise JournalError(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise JournalError(f"{path} is not a regular file")
        data = handle.read(MAX_JOURNAL_BYTES + 1)
    if len(data) > MAX_JOURNAL_BYTES:
        raise JournalError(f"{path} is over {MAX_JOURNAL_BYTES >> 20} MB")
    for line in json_lines(data):
        if line.torn:  # no newline after it: torn by a crash
            found.problems.append(
                f"{path} line {line.number}: a torn last line ({line.size:,} bytes) skipped: "
                "the step it announced never began"
            )
        elif not line.parsed:
            raise JournalError(f"{path} line {line.number}: not JSON")
        else:
            _take(found, line.value, f"{path} line {line.number}")
    return found


def _take(found: JournalRead, item: object, where: str) -> None:
    if not isinstance(item, dict):
        raise JournalError(f"{where}: not a JSON object")
    if "intent" in item:
        key, samples, created = item.get("intent"), item.get("samples"), item.get("created")
        if not (
            isinstance(key, str)
            and isinstance(samples, list)
            and all(isinstance(s, str) for s in samples)
            and isinstance(created, int | float)
        ):
            raise JournalError(f"{where}: an intent needs a key, sample ids and a time")
        found.open[key] = OpenBatch(key, samples, float(created))
    elif "batch" in item:
        entry = found.open.get(str(item.get("batch")))
        batch_id = item.get("id")
        if entry is None or not isinstance(batch_id, str):
            shown = one_line(repr(item.get("batch")), QUOTED_CHARS)
            raise JournalError(f"{where}: an id for {shown}, which has no open intent")
        entry.batch_id = batch_id
    elif "closed" in item:
        found.closed_lines += 1
        if found.open.pop(str(item.get("closed")), None) is not None:
            found.closed += 1
    elif "summary" in item:
        summary = item.get("summary")
        closed = summary.get("closed") if isinstance(summary, dict) else None
        if not isinstance(closed, int) or isinstance(closed, bool) or closed < 0:
            raise JournalError(f"{where}: a summary needs its count of closed batches")
        found.closed += closed
    else:
        raise JournalError(f"{where}: neither an intent, an id, a close nor a summary")


class BatchJournal:
    """One dataset folder's journal; every write is flushed to disk before it returns."""

    def __init__(self, folder: Path, compact_after: int = COMPACT_AFTER) -> None:
        self.path = folder / JOURNAL_FILE
        self.open: dict[str, OpenBatch] = {}
        self.pending: set[str] = set()
        """Every sample in an open batch."""
        self.compact_after = compact_after
        self.closed = 0
        """Batches closed over the journal's life (its summary's count included)."""
        self.closed_lines = 0

    def load(self) -> list[str]:
        """Read the journal (in a worker thread); the lines it skipped, to be said."""
        for stray in self.path.parent.glob(f".{JOURNAL_FILE}.*.tmp"):
            with contextlib.suppress(OSError):  # a compaction a crash cut short
                stray.unlink()
        found = _read(self.path)
        self.open = found.open
        self.closed, self.closed_lines = found.closed, found.closed_lines
        self.pending = {sample for batch in self.open.values() for sample in batch.samples}
        return found.problems

    def _append(self, item: dict[str, object]) -> None:
        try:
            with open_private(self.path) as handle:
                handle.write(orjson.dumps(item) + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
        except BadFile as exc:
            raise JournalError(str(exc)) from None

    def open_batch(self, samples: Iterable[str]) -> OpenBatch:
        """Write the intent of a new batch of `samples`, before it is created anywhere."""
        chosen = list(samples)
        taken = self.pending.intersection(chosen)
        if taken:
            raise JournalError(f"{len(taken)} samples are already in an open batch")
        batch = OpenBatch(uuid.uuid4().hex, chosen, time.time())
        self._append({"intent": batch.key, "samples": chosen, "created": batch.created})
        self.open[batch.key] = batch
        self.pending.update(chosen)
        return batch

    def created(self, batch: OpenBatch, batch_id: str) -> None:
        """Note the provider's id for `batch`."""
        self._append({"batch": batch.key, "id": batch_id})
        batch.batch_id = batch_id

    def close(self, batch: OpenBatch, status: str) -> str | None:
        """Close `batch`: its answers are records and its other samples are free again.
        Returns why a compaction due now failed (the journal stands as it was; to be said),
        else None."""
        self._append({"closed": batch.key, "status": status, "at": round(time.time(), 3)})
        self.open.pop(batch.key, None)
        self.pending.difference_update(batch.samples)
        self.closed += 1
        self.closed_lines += 1
        if self.closed_lines >= self.compact_after:
            try:
                self.compact()
            except JournalError as exc:
                self.compact_after += COMPACT_AFTER  # not again at every close
                return f"{exc}: it stays as it was, whole"
        return None

    def compact(self) -> None:
        """Rewrite the journal with its open batches and a summary, atomically (see the
        module's docstring); on an error the old journal stands and it is said."""
        lines = [orjson.dumps({"summary": {"closed": self.closed, "at": round(time.time(), 3)}})]
        for batch in self.open.values():
            lines.append(
                orjson.dumps(
                    {"intent": batch.key, "samples": batch.samples, "created": batch.created}
                )
            )
            if batch.batch_id is not None:
                lines.append(orjson.dumps({"batch": batch.key, "id": batch.batch_id}))
        folder = self.path.parent
        fd, name = tempfile.mkstemp(prefix=f".{JOURNAL_FILE}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(b"".join(line + b"\n" for line in lines))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(name, self.path)
            directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise JournalError(f"cannot compact {self.path}: {exc.strerror or exc}") from None
        self.closed_lines = 0
