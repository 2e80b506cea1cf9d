"""The on-disk layout of a dataset's output folder, and the one reader and writer of records.

A dataset folder holds `raw_responses.jsonl` (one completed response a line), `errors.jsonl`
(samples that failed after retries), `progress.json` and `run.lock`. Records come in two
layouts: the current one (top-level `completion_tokens` and `output_ids`) and the seed
script's older one (`usage.completion_tokens` and text). Every count of tokens on disk, by
the engine on resume, by the TUI and by the tests, goes through :func:`scan_records`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

# The folder's file names and the record-counting rule are the watcher's: it ships alone to
# the GPU box, so it owns the portable half of the on-disk contract and this module uses it.
from gen_tui.backends.watcher import (
    ERRORS_FILE,
    LOCK_FILE,
    MAX_COMPLETION_TOKENS,
    PROGRESS_FILE,
    RAW_FILE,
    SAMPLE_ID_MAX,
    BadFile,
    folder_problem,
    open_own,
    record_counts,
)

__all__ = [
    "ERRORS_FILE",
    "LOCK_FILE",
    "PROGRESS_FILE",
    "RAW_FILE",
    "TORN_SUFFIX",
    "BadFile",
    "Completion",
    "RecordFileError",
    "RecordWriter",
    "SampleId",
    "ScanResult",
    "check_dataset_folder",
    "error_line",
    "open_private",
    "prepare_dataset_folder",
    "quarantine_torn_tail",
    "record_counts",
    "sample_key",
    "scan_records",
    "write_json_atomic",
]

TORN_SUFFIX = ".torn"

SampleId = str | int


class RecordFileError(Exception):
    """A record file that cannot be trusted as it stands; the message names file, line and field."""


def check_dataset_folder(folder: Path) -> None:
    """Raise BadFile (one line) unless `folder` is safe to write a dataset in.

    Safe: a folder owned by us that group and others cannot write in (a sticky,
    world-writable /tmp-like folder is refused too). Anyone else who can create names in
    it can plant `run.lock` or `raw_responses.jsonl.torn.<ms>` as a link to a file of ours
    and have us overwrite it, or copy it somewhere they can read. The engine calls this
    after creating the folder and before it opens anything in it.
    """
    problem = folder_problem(os.fspath(folder))
    if problem is not None:
        raise BadFile(problem)


def prepare_dataset_folder(folder: Path) -> None:
    """Create `folder` if need be (0755 whatever the umask: a umask of 002 must not make a
    new dataset folder one that `check_dataset_folder` refuses), then check it."""
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    check_dataset_folder(folder)


def open_private(path: Path) -> BinaryIO:
    """`path` opened to append, created 0600, never through a symlink (BadFile, one line):
    for errors.jsonl and any other side file of a dataset folder."""
    return os.fdopen(open_own(os.fspath(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")


def _open_existing(path: Path, flags: int) -> int:
    """An fd of the regular file `path` (no symlink followed); a planted one is refused in
    the record file's own words."""
    try:
        return open_own(os.fspath(path), flags, 0o644)
    except BadFile as exc:
        raise RecordFileError(f"{exc}: refusing to read or write it") from None


def sample_key(sample_id: SampleId) -> str:
    """Identity of a sample across prompt files and both record layouts ("7" and 7 are one)."""
    return str(sample_id)


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

    def to_line(self) -> bytes:
        # Key order matters: the identifying counts come first so a scanner can stop early.
        record: dict[str, Any] = {
            "sample_id": self.sample_id,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "finish_reason": self.finish_reason,
        }
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
        if self.cost is not None:
            record["cost"] = self.cost
        record["created"] = round(time.time(), 3)
        return orjson.dumps(record) + b"\n"


@dataclass
class ScanResult:
    """What a record file holds: the done samples and their token total."""

    done: set[str] = field(default_factory=set)
    tokens: int = 0
    records: int = 0
    duplicates: int = 0
    lengths: list[int] = field(default_factory=list)
    valid_bytes: int = 0
    torn_tail: bytes = b""
    missing_newline: bool = False

    @property
    def mean(self) -> float | None:
        return self.tokens / self.records if self.records else None


_CHUNK = 1 << 20
_FAST_HEAD = b'{"sample_id":'
_FAST_TOKENS = b',"completion_tokens":'


def _fast_counts(line: bytes) -> tuple[str, int] | None:
    """(key, tokens) read off the head of a line in our own layout, without parsing the body.

    Our writer puts `sample_id` and `completion_tokens` first, so a resume scan need not
    decode thousands of output ids per record. Anything unusual (escapes, other layouts,
    a line not ending in `}`, a key seen twice) returns None and gets a full parse.
    """
    if not line.startswith(_FAST_HEAD) or not line.rstrip().endswith(b"}"):
        return None
    start = len(_FAST_HEAD)
    if line[start : start + 1] == b'"':
        end = line.find(b'"', start + 1)
        if end < 0:
            return None
        raw = line[start + 1 : end]
        if b"\\" in raw:
            return None
        try:
            key = raw.decode("utf-8", "strict")
        except UnicodeDecodeError:
            return None
        end += 1
    else:
        end = line.find(b",", start)
        digits = line[start:end]
        # The counting rule's bounds (`record_counts`), checked inline (this runs per line):
        # no leading zero (not JSON), nothing past the bound (the full parse then decides).
        if end < 0 or not digits.isdigit() or len(digits) > 19 or digits[:1] == b"0" != digits:
            return None
        number = int(digits)
        if number > SAMPLE_ID_MAX:
            return None
        key = str(number)
    if not line.startswith(_FAST_TOKENS, end):
        return None
    start = end + len(_FAST_TOKENS)
    end = line.find(b",", start)
    digits = line[start:end]
    if end < 0 or not digits.isdigit() or len(digits) > 8 or digits[:1] == b"0" != digits:
        return None
    tokens = int(digits)
    if tokens > MAX_COMPLETION_TOKENS:  # 10**30 once marked a dataset done
        return None
    if line.find(b'"sample_id":', end) >= 0 or line.find(b'"completion_tokens":', end) >= 0:
        # Two records on one line: a write cut short (a full disk) with the next one glued
        # on. Only a full parse can tell; the head alone would count the cut one instead.
        # (Inside a JSON string these keys have escaped quotes, so they cannot match there.)
        return None
    return key, tokens


_KEEP_LENGTHS = 4096


def _lines(path: Path) -> Iterator[tuple[int, int, bytes, bool]]:
    """Yield (line number, byte offset, line without newline, ended by newline)."""
    offset = 0
    line_no = 0
    rest = b""
    with os.fdopen(_open_existing(path, os.O_RDONLY), "rb") as handle:
        while chunk := handle.read(_CHUNK):
            data = rest + chunk
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                line_no += 1
                yield line_no, offset + start, data[start:end], True
                start = end + 1
            offset += start
            rest = data[start:]
    if rest:
        yield line_no + 1, offset, rest, False


def scan_records(path: Path) -> ScanResult:
    """Count the records of `path` (absent means empty) without keeping their bodies.

    A last line that is cut off or unparseable is a crash's torn write: it is reported in
    `torn_tail` (with `valid_bytes` the length of the good prefix) for the caller to move aside.
    Any other bad line raises :class:`RecordFileError` naming file, line and field: a file we
    cannot read completely is never silently partially counted.
    """
    result = ScanResult()
    if not os.path.lexists(path):
        return result
    pending_error: tuple[int, int, bytes, str] | None = None
    for line_no, offset, line, ended in _lines(path):
        if pending_error is not None:
            bad_no, _, _, reason = pending_error
            raise RecordFileError(f"{path}:{bad_no}: {reason}")
        if not line.strip():
            result.valid_bytes = offset + len(line) + (1 if ended else 0)
            continue
        fast = _fast_counts(line) if ended else None
        if fast is not None:
            key, tokens = fast
        else:
            try:
                parsed = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                pending_error = (line_no, offset, line, f"not valid JSON ({exc})")
                continue
            try:
                sample_id, tokens = record_counts(parsed)
            except ValueError as exc:
                pending_error = (line_no, offset, line, str(exc))
                continue
            key = sample_key(sample_id)
        if key in result.done:
            result.duplicates += 1
        result.done.add(key)
        result.tokens += tokens
        result.records += 1
        if len(result.lengths) < _KEEP_LENGTHS:
            result.lengths.append(tokens)
        else:
            result.lengths[result.records % _KEEP_LENGTHS] = tokens
        result.valid_bytes = offset + len(line) + (1 if ended else 0)
        result.missing_newline = not ended
    if pending_error is not None:
        _, offset, _, _ = pending_error
        result.valid_bytes = offset
        with os.fdopen(_open_existing(path, os.O_RDONLY), "rb") as handle:
            handle.seek(offset)
            result.torn_tail = handle.read()
        result.missing_newline = False
    return result


def quarantine_torn_tail(path: Path, scan: ScanResult) -> Path | None:
    """Move a torn last line to a side file and cut it from `path`; return the side file.

    The side file is written and synced before the record file is truncated, so the bytes
    exist somewhere at every instant. A complete last record lacking only its newline gets one.
    """
    if scan.torn_tail:
        fd, side = _new_side_file(path)
        with os.fdopen(fd, "wb") as handle:
            handle.write(scan.torn_tail)
            handle.flush()
            os.fsync(handle.fileno())
        fd = _open_existing(path, os.O_RDWR)
        try:
            os.ftruncate(fd, scan.valid_bytes)
            os.fsync(fd)
        finally:
            os.close(fd)
        scan.torn_tail = b""
        return side
    if scan.missing_newline:
        with os.fdopen(_open_existing(path, os.O_WRONLY | os.O_APPEND), "ab") as handle:
            handle.write(b"\n")
        scan.valid_bytes += 1
        scan.missing_newline = False
    return None


def _new_side_file(path: Path) -> tuple[int, Path]:
    """(fd, path) of a new 0600 `<record file>.torn.<ms>`: created with O_EXCL, so a name
    someone planted in advance (the milliseconds are guessable) is never followed; then the
    name gets a random part no one can guess. The torn line may hold anything."""
    stamp = int(time.time() * 1000)
    for attempt in range(100):
        suffix = f"{stamp}" if attempt == 0 else f"{stamp}-{os.urandom(6).hex()}"
        side = path.with_name(f"{path.name}{TORN_SUFFIX}.{suffix}")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            return open_own(os.fspath(side), flags, 0o600), side
        except (FileExistsError, BadFile):
            continue
    raise RecordFileError(f"{path}: cannot make a side file for its torn last line")


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
