"""The on-disk layout of a dataset's output folder, and the one writer of records (the
reader is :mod:`record_scan`; its names are re-exported here).

A dataset folder holds `raw_responses.jsonl` (one completed response a line), `errors.jsonl`
(samples that failed after retries), `progress.json` and `run.lock`. Records come in two
layouts: the current one (top-level `completion_tokens` and `output_ids`) and the seed
script's older one (`usage.completion_tokens` and text)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

# Reading lives in record_scan; its names are part of this module's contract too.
from gen_tui.backends.store.record_scan import (
    MAX_RECORD_LINE,
    TORN_SUFFIX,
    RecordFileError,
    SampleId,
    ScanResult,
    _open_existing,
    open_records,
    quarantine_torn_tail,
    record_lines,
    record_turn,
    sample_key,
    scan_records,
    turn_key,
)

# The folder's file names and the record-counting rule are the watcher's: it ships alone to
# the GPU box, so it owns the portable half of the on-disk contract and this module uses it.
from gen_tui.backends.watcher import (
    ERRORS_FILE,
    LOCK_FILE,
    PROGRESS_FILE,
    RAW_FILE,
    BadFile,
    ancestor_problem,
    folder_problem,
    open_own,
    record_counts,
)

__all__ = [
    "ERRORS_FILE",
    "LOCK_FILE",
    "MAX_RECORD_LINE",
    "PROGRESS_FILE",
    "RAW_FILE",
    "TORN_SUFFIX",
    "BadFile",
    "Completion",
    "RecordFileError",
    "RecordWriter",
    "SampleId",
    "ScanResult",
    "ancestor_problem",
    "check_dataset_folder",
    "error_line",
    "open_private",
    "open_records",
    "prepare_dataset_folder",
    "quarantine_torn_tail",
    "record_counts",
    "record_lines",
    "record_turn",
    "sample_key",
    "scan_records",
    "seal",
    "seal_problem",
    "sealed",
    "turn_key",
    "write_json_atomic",
]


def check_dataset_folder(folder: Path) -> None:
    """Raise BadFile (one line) unless `folder` is safe to write a dataset in.

    Safe: a folder owned by us that group and others cannot write in (a sticky,
    world-writable /tmp-like folder is refused too). Anyone else who can create names in
    it can plant `run.lock` or `raw_responses.jsonl.torn.<ms>` as a link to a file of ours
    and have us overwrite it, or copy it somewhere they can read. The folders above it
    must be safe too (:func:`ancestor_problem`). The engine calls this after creating the
    folder and before it opens anything in it.
    """
    problem = folder_problem(os.fspath(folder)) or ancestor_problem(os.fspath(folder))
    if problem is not None:
        raise BadFile(problem)


def prepare_dataset_folder(folder: Path) -> None:
    """Create `folder` and any missing folder above it 0755 whatever the umask (a umask of
    002 must not make a folder that `check_dataset_folder` refuses), then check it. The
    folders above are checked first: nothing is made in a folder someone else controls."""
    missing = [p for p in folder.parents if not p.exists()]
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o755)
    problem = ancestor_problem(os.fspath(folder))
    if problem is not None:
        raise BadFile(problem)
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o755)
    check_dataset_folder(folder)


def open_private(path: Path) -> BinaryIO:
    """`path` opened to append, created 0600, never through a symlink (BadFile, one line):
    for errors.jsonl and any other side file of a dataset folder."""
    return os.fdopen(open_own(os.fspath(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")


@dataclass(frozen=True, slots=True)
class Completion:
    """One completed response, as it is written to `raw_responses.jsonl`."""

    sample_id: SampleId
    completion_tokens: int
    prompt_tokens: int
    finish_reason: str
    output_ids: list[int] | None
    text: str | None = None
    latency_s: float | None = None
    server: str | None = None
    cost: float | None = None
    reasoning: str | None = None
    """A thinking model's trace, sent apart from the answer (OpenAI path); `output_ids`
    then cover the whole turn, reasoning included."""
    ids_gap: int | None = None
    """`len(output_ids) - completion_tokens` where gen-tui tokenized the text itself: how
    far its ids are from what the server counted (never on SGLang's native ids)."""
    turn: int | None = None
    """With `--turns all`: the turn of conversation `sample_id` this answers (1-based)."""
    turns: int | None = None
    """With `--turns all`: how many turns that conversation has."""
    api: str | None = None
    """The API that made it (`sglang`, `openai`), in a run over a mixed fleet."""
    lane: str | None = None
    """The lane (`--lane NAME=...`) that made it, in a run over a mixed fleet."""

    def to_line(self) -> bytes:
        # Key order matters: the identifying counts come first so a scanner can stop early.
        record: dict[str, Any] = {
            "sample_id": self.sample_id,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "finish_reason": self.finish_reason,
        }
        if self.turn is not None:  # right after the head: the resume scan reads it there
            record["turn"] = self.turn
            record["turns"] = self.turns
        if self.ids_gap is not None:
            record["ids_gap"] = self.ids_gap
        if self.output_ids is not None:
            record["output_ids"] = self.output_ids
        if self.reasoning is not None:
            record["reasoning"] = self.reasoning
        if self.text is not None:
            record["text"] = self.text
        if self.latency_s is not None:
            record["latency_s"] = round(self.latency_s, 3)
        if self.server is not None:
            record["server"] = self.server
        if self.lane is not None:
            record["lane"] = self.lane
        if self.api is not None:
            record["api"] = self.api
        if self.cost is not None:
            record["cost"] = self.cost
        record["created"] = round(time.time(), 3)
        return seal(orjson.dumps(record)) + b"\n"


SEAL_KEY = b',"crc32":"'
SEAL_LEN = len(SEAL_KEY) + 8 + 2  # the key, eight hex digits, the closing quote and brace
"""A record ends with `"crc32":"xxxxxxxx"}`: the CRC-32 of the line without it. The fast
scans read only a line's head; a byte flipped in its body (a digit of `output_ids`) keeps
valid JSON and a plausible id, and only this catches it, in `gen-tui verify`."""


def seal(body: bytes) -> bytes:
    """`body` (one JSON object, no newline) with its CRC-32 as its last field."""
    return body[:-1] + SEAL_KEY + b"%08x" % zlib.crc32(body) + b'"}'


def seal_problem(line: bytes) -> str | None:
    """Why `line` (a record, newline or not) does not match its CRC-32, or None; a line
    with no seal (older gen-tui, a foreign script) is None too: see :func:`sealed`."""
    line = line.rstrip(b"\r\n")
    if not sealed(line):
        return None
    body = line[:-SEAL_LEN] + b"}"
    said = line[-SEAL_LEN + len(SEAL_KEY) : -2]
    if b"%08x" % zlib.crc32(body) != said:
        return "its bytes do not match its crc32 (changed after it was written)"
    return None


def sealed(line: bytes) -> bool:
    """Whether a record line (no newline) carries a CRC-32 seal."""
    line = line.rstrip(b"\r\n")
    return len(line) > SEAL_LEN and line[-SEAL_LEN:].startswith(SEAL_KEY)


class RecordWriter:
    """Append-only writer: each record is one `write()` of a whole line to an O_APPEND fd.

    A kill can then only tear the very last line, which the next scan quarantines.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = _open_existing(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._size = os.fstat(self._fd).st_size
        """Where the next line starts: one writer (the lock), so it is counted, not asked."""

    def write(self, line: bytes) -> None:
        """Append one whole line, or raise OSError after cutting off what part of it got in.

        A full disk can take half a line and refuse the rest; left there, it would glue the
        next record (written once space returns) onto a torn one in the middle of the file.
        """
        start = self._size
        view = memoryview(line)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise
        self._size = start + len(line)

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def error_line(sample_id: SampleId, reason: str, attempts: int, status: int | None) -> bytes:
    """One line of `errors.jsonl`: a sample given up on in this run (retried on the next)."""
    return (
        orjson.dumps(
            {
                "sample_id": sample_id,
                "reason": reason,
                "attempts": attempts,
                "status": status,
                "time": round(time.time(), 3),
            }
        )
        + b"\n"
    )


def write_json_atomic(path: Path, payload: Any) -> None:
    """Replace `path` with `payload` so readers see the old or the new file, never a mix.

    The temporary file gets a fresh name (mkstemp: O_EXCL, 0600), never a predictable one
    that a link planted in advance could redirect.
    """
    fd, name = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()  # a full disk must not also collect half-written temporary files
        raise
