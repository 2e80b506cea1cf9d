"""Reading record files: the one scan that counts a dataset's tokens and done samples, the
bounded line reader, and moving a crash's torn last line aside.

Every count of tokens on disk, by the engine on resume, by the TUI and by the tests, goes
through :func:`scan_records`. Records come in two layouts: the current one (top-level
`completion_tokens` and `output_ids`) and the seed script's older one
(`usage.completion_tokens` and text). Record files are data from elsewhere once copied
around: no line is held past MAX_RECORD_LINE, no torn tail read whole.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import orjson

from gen_tui.backends.untrusted import QUOTED_CHARS, one_line
from gen_tui.backends.watcher import (
    CUT,
    MAX_COMPLETION_TOKENS,
    RECORD_MAX_BYTES,
    SAMPLE_ID_MAX,
    BadFile,
    open_own,
    record_counts,
    record_cut,
)

TORN_SUFFIX = ".torn"

SampleId = str | int


class RecordFileError(Exception):
    """A record file that cannot be trusted as it stands; the message names file, line and field."""


def _open_existing(path: Path, flags: int) -> int:
    """An fd of the regular file `path` (no symlink followed); a planted one is refused in
    the record file's own words."""
    try:
        return open_own(os.fspath(path), flags, 0o644)
    except BadFile as exc:
        raise RecordFileError(f"{exc}: refusing to read or write it") from None


def open_records(path: Path) -> BinaryIO:
    """`path` opened to read, a regular file only (RecordFileError otherwise, one line):
    export and verify read folders where someone may have left a FIFO, which a plain open
    would wait on for ever."""
    return os.fdopen(_open_existing(path, os.O_RDONLY), "rb")


def sample_key(sample_id: SampleId) -> str:
    """Identity of a sample across prompt files and both record layouts ("7" and 7 are one)."""
    return str(sample_id)


TURN_MARK = "\x1f"
"""Between a conversation's key and a turn number in a turn's record key (`--turns all`):
a control character, which no real sample id holds, so a turn key never equals a sample key."""


def turn_key(key: str, turn: int) -> str:
    """The record key of turn `turn` (1-based) of the conversation keyed `key`."""
    return f"{key}{TURN_MARK}{turn}"


def record_turn(record: object) -> tuple[int, int] | None:
    """(turn, turns) of a parsed record written by `--turns all`, else None (a record of a
    whole sample, or fields that are not positive integers with turn <= turns)."""
    if not isinstance(record, dict):
        return None
    turn, turns = record.get("turn"), record.get("turns")
    if type(turn) is not int or type(turns) is not int or not 1 <= turn <= turns:
        return None
    return turn, turns


@dataclass
class ScanResult:
    """What a record file holds: the done samples, their token total and how many of them
    were cut at their cap (the truncation rule, `record_cut`)."""

    done: set[str] = field(default_factory=set)
    tokens: int = 0
    records: int = 0
    truncated: int = 0
    duplicates: int = 0
    lengths: list[int] = field(default_factory=list)
    turn_counts: dict[str, int] = field(default_factory=dict)
    """With `--turns all`: each conversation on disk and how many turns it has (its keys
    in `done` are its turns' keys, and the conversation's own key once all are there)."""
    valid_bytes: int = 0
    torn_tail: bytes = b""
    missing_newline: bool = False

    @property
    def mean(self) -> float | None:
        return self.tokens / self.records if self.records else None


_CHUNK = 1 << 20
_FAST_HEAD = b'{"sample_id":'
_FAST_TOKENS = b',"completion_tokens":'
_FAST_PROMPT = b',"prompt_tokens":'
_FAST_REASON = b',"finish_reason":'
_FAST_CUT = b'"%s"' % CUT.encode()


_FAST_TURN = b',"turn":'
_FAST_TURNS = b',"turns":'


def _fast_turn(line: bytes, start: int) -> tuple[int, int] | bool | None:
    """(turn, turns) written right after the finish reason's string that starts at
    `start`; None when there are none (a whole sample's record), False when the full parse
    must decide."""
    end = line.find(b'"', start + 1)
    if end < 0 or b"\\" in line[start:end]:
        return False
    end += 1
    if not line.startswith(_FAST_TURN, end):
        return False if line.find(b'"turn":', end) >= 0 else None
    numbers = []
    for mark in (_FAST_TURN, _FAST_TURNS):
        if not line.startswith(mark, end):
            return False
        begin = end + len(mark)
        end = line.find(b",", begin)
        digits = line[begin:end]
        if end < 0 or not digits.isdigit() or len(digits) > 6 or digits[:1] == b"0":
            return False
        numbers.append(int(digits))
    turn, turns = numbers
    return (turn, turns) if turn <= turns else False


def _fast_counts(line: bytes) -> tuple[str, int, bool] | None:
    """(key, tokens, cut) read off the head of a line in our own layout, without parsing the
    body.

    Our writer puts `sample_id`, `completion_tokens`, `prompt_tokens` and `finish_reason`
    first, so a resume scan need not decode thousands of output ids per record. Anything
    unusual (escapes, other layouts, a line not ending in `}`, a key seen twice) returns
    None and gets a full parse.
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
    # The finish reason, at its place in the head: after a plain integer `prompt_tokens`,
    # so still at the top level (a nested one never gets here). A string is cut or not by
    # its bytes; anything else is the full parse's to judge.
    if not line.startswith(_FAST_PROMPT, end):
        return None
    start = end + len(_FAST_PROMPT)
    end = line.find(b",", start)
    if end < 0 or not line[start:end].isdigit() or not line.startswith(_FAST_REASON, end):
        return None
    start = end + len(_FAST_REASON)
    if line[start : start + 1] != b'"':
        return None
    turn = _fast_turn(line, start)
    if turn is False:
        return None
    if turn is not None:
        assert not isinstance(turn, bool)
        key = turn_key(key, turn[0]) + f"/{turn[1]}"
    return key, tokens, line.startswith(_FAST_CUT, start)


_KEEP_LENGTHS = 4096


MAX_RECORD_LINE = RECORD_MAX_BYTES
"""The watcher's bound (`watcher.RECORD_MAX_BYTES`, where it says why): a longer line is no
record, read past and never held, by this scan and the watcher's alike."""
TORN_KEPT = 1 << 20
"""Of a torn last line, what the scan keeps in memory; the rest is copied aside from disk."""


def _lines(path: Path) -> Iterator[tuple[int, int, bytes | int, bool]]:
    """Yield (line number, byte offset, line without newline, ended by newline); a line over
    MAX_RECORD_LINE bytes is given as its length instead of its bytes."""
    offset = 0  # of the chunk in the file
    start_of_line = 0
    line_no = 0
    pieces: list[bytes] = []  # the line so far, when it spans chunks
    held = 0
    skipped = -1  # the bytes of an over-long line read past (-1: not in one)
    with os.fdopen(_open_existing(path, os.O_RDONLY), "rb") as handle:
        while chunk := handle.read(_CHUNK):
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                line_no += 1
                if skipped >= 0:
                    yield line_no, start_of_line, skipped + end - start, True
                    skipped = -1
                elif pieces:
                    yield line_no, start_of_line, b"".join([*pieces, chunk[start:end]]), True
                    pieces, held = [], 0
                else:
                    yield line_no, start_of_line, chunk[start:end], True
                start = end + 1
                start_of_line = offset + start
            if start < len(chunk):
                if skipped >= 0:
                    skipped += len(chunk) - start
                else:
                    pieces.append(chunk[start:])
                    held += len(chunk) - start
                    if held > MAX_RECORD_LINE:
                        skipped, pieces, held = held, [], 0
            offset += len(chunk)
    if skipped >= 0:
        yield line_no + 1, start_of_line, skipped, False
    elif pieces:
        yield line_no + 1, start_of_line, b"".join(pieces), False


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
        if isinstance(line, int):
            reason = f"a line of {line:,} bytes, longer than any record ({MAX_RECORD_LINE:,})"
            pending_error = (line_no, offset, b"", reason)
            continue
        if not line.strip():
            result.valid_bytes = offset + len(line) + (1 if ended else 0)
            continue
        fast = _fast_counts(line) if ended else None
        if fast is not None:
            key, tokens, cut = fast
        else:
            try:
                parsed = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                pending_error = (line_no, offset, line, f"not valid JSON ({exc})")
                continue
            try:
                sample_id, tokens = record_counts(parsed)
            except ValueError as exc:
                # The rule's reason quotes the bad value: bounded, one line.
                pending_error = (line_no, offset, line, one_line(str(exc), QUOTED_CHARS))
                continue
            key = sample_key(sample_id)
            cut = record_cut(parsed)
            turn = record_turn(parsed)
            if turn is not None:
                key = turn_key(key, turn[0]) + f"/{turn[1]}"
        if TURN_MARK in key:
            key = _count_turn(result, key)
        if key in result.done:
            result.duplicates += 1
        result.done.add(key)
        result.tokens += tokens
        result.records += 1
        result.truncated += cut
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
            result.torn_tail = handle.read(TORN_KEPT) or b"\n"  # non-empty: there is one
        result.missing_newline = False
    return result


def _count_turn(result: ScanResult, scanned: str) -> str:
    """Note a turn record's conversation (scanned as `turn key/turns`) and return its turn
    key; a conversation whose every turn is on disk gets its own key in `done` too."""
    key, _, turns = scanned.rpartition("/")
    conversation = key.rpartition(TURN_MARK)[0]
    count = int(turns)
    result.turn_counts[conversation] = count
    if key not in result.done and all(
        turn_key(conversation, turn) in result.done or turn_key(conversation, turn) == key
        for turn in range(1, count + 1)
    ):
        result.done.add(conversation)
    return key


def quarantine_torn_tail(path: Path, scan: ScanResult) -> Path | None:
    """Move a torn last line to a side file and cut it from `path`; return the side file.

    The side file is written and synced before the record file is truncated, so the bytes
    exist somewhere at every instant. A complete last record lacking only its newline gets one.
    """
    if scan.torn_tail:
        fd, side = _new_side_file(path)
        with (
            os.fdopen(fd, "wb") as handle,
            os.fdopen(_open_existing(path, os.O_RDONLY), "rb") as source,
        ):
            source.seek(scan.valid_bytes)  # copied from disk: the scan kept only its head
            while chunk := source.read(_CHUNK):
                handle.write(chunk)
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


def record_lines(
    handle: BinaryIO, limit: int = MAX_RECORD_LINE
) -> Iterator[tuple[int, int, bytes | int]]:
    """(line number, byte offset, line) for each line of `handle` (a regular file's, read
    from its start); a line over `limit` bytes is given as its length instead.

    Memory: HELD_LINE plus a chunk, or the longest line within `limit`, whichever is more.
    A line that outgrows HELD_LINE is first measured (read on in chunks, nothing kept), then
    read back whole only if it is a record's size: a 10 GB file without a newline, or with
    lines of gigabytes, costs a chunk, not the line. (`readline(limit + 1)` held up to
    twice `limit` while it joined its pieces: 550 MB for one line without end.)
    """
    line_no = 0
    offset = 0  # of buf[0] in the file
    buf = b""
    pos = 0  # where the current line starts in buf
    while True:
        end = buf.find(b"\n", pos)
        if end >= 0:
            line_no += 1
            line = buf[pos : end + 1] if end - pos <= limit else end + 1 - pos
            yield line_no, offset + pos, line
            pos = end + 1
            continue
        if len(buf) - pos > HELD_LINE:  # a long line: measure it before holding any more
            start = offset + pos
            size, ended = _measure(handle, len(buf) - pos)
            buf, pos = b"", 0
            line_no += 1
            if size - ended <= limit:
                handle.seek(start)
                yield line_no, start, handle.read(size)
            else:
                yield line_no, start, size
            offset = start + size
            handle.seek(offset)
            continue
        chunk = handle.read(_CHUNK)
        if not chunk:
            if pos < len(buf):
                rest = len(buf) - pos
                yield line_no + 1, offset + pos, buf[pos:] if rest <= limit else rest
            return
        offset += pos
        buf, pos = buf[pos:] + chunk, 0


HELD_LINE = 4 << 20
"""The most of a line :func:`record_lines` gathers before it measures the rest first."""


def _measure(handle: BinaryIO, seen: int) -> tuple[int, bool]:
    """(the bytes of a line of which `seen` were read, up to its newline included; whether
    it ended with one), reading on from `handle`'s position and keeping nothing."""
    size = seen
    while chunk := handle.read(_CHUNK):
        end = chunk.find(b"\n")
        if end >= 0:
            return size + end + 1, True
        size += len(chunk)
    return size, False
