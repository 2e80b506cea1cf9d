"""An independent checker of dataset folders: what the chaos suite trusts instead of the engine.

Why independent: a checker that shared `backends.records` with the engine would share its
bugs. This one reads the files with plain `json` and tests the lock with its own `flock`,
and it remembers what it saw after every cycle, so it can tell "a record disappeared" or "a
byte of an old record changed" from "the engine wrote new records".

What it holds the engine to, after every cycle:

- the lock is free once the writer is gone;
- every complete line of `raw_responses.jsonl` is a record (a JSON object with a string or
  integer `sample_id`, `completion_tokens` equal to the number of `output_ids`); a torn tail
  without a newline may only follow a kill, and the next run must move exactly those bytes
  to a `raw_responses.jsonl.torn.*` side file;
- what the checker verified before is still there, byte for byte, as a prefix of the file;
- no sample_id twice; every sample_id is one of the prompts';
- progress.json parses, and never claims more than the file holds (the engine counts a
  record only after writing it); after a clean exit it equals a recount exactly.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RAW = "raw_responses.jsonl"
PROGRESS = "progress.json"
LOCK = "run.lock"
ERRORS = "errors.jsonl"
SIDE_GLOB = RAW + ".torn.*"


class CheckFailed(AssertionError):
    """A broken guarantee; the message says which, where and what was found."""


@dataclass
class FolderState:
    """What the checker has verified of one dataset folder so far."""

    folder: Path
    valid: bytes = b""
    torn: bytes = b""
    side_files: dict[str, bytes] = field(default_factory=dict)
    ever: set[str] = field(default_factory=set)
    tokens: int = 0
    records: int = 0
    quarantined: int = 0
    injected: int = 0

    @property
    def raw(self) -> Path:
        return self.folder / RAW

    def progress_state(self) -> str | None:
        """The `state` progress.json names now (None when there is none)."""
        path = self.folder / PROGRESS
        if not path.exists():
            return None
        return json.loads(path.read_bytes()).get("state")

    def records_now(self) -> list[Record]:
        """The complete records of the file as it is now, read afresh."""
        data = self.raw.read_bytes() if self.raw.exists() else b""
        records, _ = split_records(data, str(self.raw))
        return records


@dataclass
class Record:
    sample_id: str
    tokens: int


def lock_is_free(path: Path) -> bool:
    """Take the lock ourselves, exclusively and without waiting, then let it go."""
    if not path.exists():
        return True
    fd = os.open(path, os.O_RDONLY)  # flock ignores the open mode; a read-only disk allows this
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
            return False
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def parse_record(line: bytes, where: str) -> Record:
    """One complete record line in the engine's layout, or CheckFailed naming what is wrong."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise CheckFailed(f"{where}: not JSON ({exc}): {line[:120]!r}") from None
    if not isinstance(value, dict):
        raise CheckFailed(f"{where}: not a JSON object")
    sample_id = value.get("sample_id")
    if isinstance(sample_id, bool) or not isinstance(sample_id, str | int):
        raise CheckFailed(f"{where}: bad sample_id {sample_id!r}")
    tokens = value.get("completion_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise CheckFailed(f"{where}: bad completion_tokens {tokens!r}")
    ids = value.get("output_ids")
    if ids is not None and (not isinstance(ids, list) or len(ids) != tokens):
        raise CheckFailed(f"{where}: {tokens} completion_tokens but output_ids {str(ids)[:60]}")
    if not isinstance(value.get("finish_reason"), str):
        raise CheckFailed(f"{where}: no finish_reason")
    return Record(str(sample_id), tokens)


def split_records(data: bytes, where: str, first_line: int = 1) -> tuple[list[Record], bytes]:
    """(records of the complete lines, the bytes after the last newline)."""
    records = []
    cut = data.rfind(b"\n") + 1
    for index, line in enumerate(data[:cut].split(b"\n")[:-1]):
        if not line.strip():
            continue
        records.append(parse_record(line, f"{where}:{first_line + index}"))
    return records, data[cut:]


def all_records(state: FolderState) -> list[Record]:
    records, _ = split_records(state.valid, str(state.raw))
    return records


@dataclass
class CycleReport:
    """What one check of one folder found (for the figures)."""

    records: int
    new_records: int
    tokens: int
    torn_tail: bool
    quarantined: bool
    progress: dict[str, Any] | None


def check_folder(
    state: FolderState, prompt_ids: set[str], *, clean_exit: bool, pid: int | None = None
) -> CycleReport:
    """Check one dataset folder after its writer is gone; update `state`; raise CheckFailed."""
    folder = state.folder
    if not lock_is_free(folder / LOCK):
        raise CheckFailed(f"{folder / LOCK}: still locked after the writer exited")
    data = state.raw.read_bytes() if state.raw.exists() else b""
    quarantined = False
    new_sides = {
        path.name: path.read_bytes()
        for path in sorted(folder.glob(SIDE_GLOB))
        if path.name not in state.side_files
    }
    if state.torn:
        if new_sides:
            wrong = {name: body for name, body in new_sides.items() if body != state.torn}
            if wrong:
                name, body = next(iter(wrong.items()))
                raise CheckFailed(
                    f"{folder / name}: quarantined {body[:80]!r}, but the torn tail was "
                    f"{state.torn[:80]!r}"
                )
            if data.startswith(state.valid + state.torn):
                # Killed between writing the side file and cutting the tail: still pending.
                pass
            else:
                quarantined = True
                state.quarantined += 1
                state.torn = b""
        elif data != state.valid + state.torn:
            raise CheckFailed(
                f"{state.raw}: changed although its torn tail was never quarantined "
                f"({len(state.valid) + len(state.torn)} bytes before, {len(data)} now)"
            )
    elif new_sides:
        raise CheckFailed(
            f"{folder}: side file(s) {sorted(new_sides)} appeared, but no torn tail was there"
        )
    state.side_files.update(new_sides)
    if not data.startswith(state.valid):
        at = next(
            (i for i, (a, b) in enumerate(zip(data, state.valid, strict=False)) if a != b),
            min(len(data), len(state.valid)),
        )
        raise CheckFailed(
            f"{state.raw}: verified records changed or vanished: first difference at byte {at} "
            f"({len(state.valid)} verified bytes, file now {len(data)} bytes)"
        )
    if state.torn:
        new_records: list[Record] = []
        tail = state.torn
    else:
        first_line = state.valid.count(b"\n") + 1
        new_records, tail = split_records(data[len(state.valid) :], str(state.raw), first_line)
        if tail and clean_exit:
            raise CheckFailed(f"{state.raw}: torn last line after a clean exit: {tail[:80]!r}")
        state.valid = data[: len(data) - len(tail)]
        state.torn = tail
    records = all_records(state)
    counts = Counter(record.sample_id for record in records)
    duplicated = sorted(key for key, n in counts.items() if n > 1)
    if duplicated:
        raise CheckFailed(f"{state.raw}: duplicate sample_ids {duplicated[:5]}")
    strangers = sorted(set(counts) - prompt_ids)
    if strangers:
        raise CheckFailed(f"{state.raw}: sample_ids that are no prompt's: {strangers[:5]}")
    missing = state.ever - set(counts)
    if missing:
        raise CheckFailed(f"{state.raw}: records lost: {sorted(missing)[:5]}")
    state.ever |= set(counts)
    state.records = len(records)
    state.tokens = sum(record.tokens for record in records)
    progress = check_progress(state, clean_exit=clean_exit, pid=pid)
    return CycleReport(
        records=state.records,
        new_records=len(new_records),
        tokens=state.tokens,
        torn_tail=bool(state.torn),
        quarantined=quarantined,
        progress=progress,
    )


def check_progress(
    state: FolderState, *, clean_exit: bool, pid: int | None
) -> dict[str, Any] | None:
    """progress.json against the recount: equal after a clean exit, never ahead of the file."""
    path = state.folder / PROGRESS
    if not path.exists():
        if clean_exit and state.records:
            raise CheckFailed(f"{path}: missing after a clean exit")
        return None
    try:
        progress = json.loads(path.read_bytes())
    except ValueError as exc:
        raise CheckFailed(f"{path}: not JSON ({exc}): it must be replaced atomically") from None
    if not isinstance(progress, dict):
        raise CheckFailed(f"{path}: not a JSON object")
    claimed = (progress.get("samples"), progress.get("tokens"))
    actual = (state.records, state.tokens)
    if clean_exit and pid is not None and progress.get("pid") == pid and claimed != actual:
        raise CheckFailed(f"{path}: says (samples, tokens) = {claimed}, the file holds {actual}")
    if not isinstance(claimed[0], int) or not isinstance(claimed[1], int):
        raise CheckFailed(f"{path}: samples/tokens missing: {claimed}")
    if claimed[0] > actual[0] or claimed[1] > actual[1]:
        raise CheckFailed(
            f"{path}: claims {claimed} (samples, tokens) but the file holds only {actual}: "
            "a counted record is not on disk"
        )
    return progress


def inject_torn_tail(state: FolderState, body: bytes, newline: bool) -> None:
    """Append a cut-off record, as a crash in the middle of a write would leave it."""
    if state.torn:
        return
    tail = body + (b"\n" if newline else b"")
    with open(state.raw, "ab") as handle:
        handle.write(tail)
    state.torn = tail
    state.injected += 1


def sample_of_rid(rid: str) -> tuple[str, str] | None:
    """(dataset, sample_id) of an engine rid `DATASET/SAMPLE/HEX`."""
    parts = rid.split("/")
    if len(parts) < 3:
        return None
    return parts[0], "/".join(parts[1:-1])


def error_ids(folder: Path) -> set[str]:
    """Samples the run gave up on (errors.jsonl), read with plain json."""
    path = folder / ERRORS
    if not path.exists():
        return set()
    found = set()
    for line in path.read_bytes().splitlines():
        if line.strip():
            found.add(str(json.loads(line)["sample_id"]))
    return found


# ---- totals at a byte offset, and who holds a lock (the link chaos scenario) -------------


def prefix_counts(data: bytes, where: str) -> dict[int, tuple[int, int, Record | None]]:
    """For 0 and every line end of `data`: (records, tokens) of the lines before that byte
    offset, and the record on the next line (None if no complete line follows).

    A watcher reporting totals at an offset must match that entry exactly, or, when it
    counted a last line that had no newline yet, that entry plus the next record. An offset
    missing here is no line end: a watcher that reports it counted part of a line.
    """
    counts: dict[int, tuple[int, int, Record | None]] = {}
    records = tokens = offset = 0
    number = 0
    while True:
        end = data.find(b"\n", offset)
        if end < 0:
            counts[offset] = (records, tokens, None)
            return counts
        number += 1
        line = data[offset:end]
        record = parse_record(line, f"{where}:{number}") if line.strip() else None
        counts[offset] = (records, tokens, record)
        if record is not None:
            records += 1
            tokens += record.tokens
        offset = end + 1


def flock_holders(path: Path) -> set[int]:
    """Pids holding an `flock` on `path`, read from /proc/locks: nothing is taken, so a writer
    starting at that moment is never refused because of the check."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return set()
    holders = set()
    for row in Path("/proc/locks").read_text().splitlines():
        parts = row.split()
        # "3: FLOCK  ADVISORY  WRITE 1234 00:2c:5678 0 EOF"; a blocked waiter has "->" first.
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            pid = int(parts[4])
        except ValueError:
            continue
        if key == (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino):
            holders.add(pid)
    return holders


def prompt_ids(path: Path) -> set[str]:
    """The sample ids of a prompt file, read with plain json (not the engine's parser)."""
    return {str(json.loads(line)["id"]) for line in path.read_bytes().splitlines() if line}
