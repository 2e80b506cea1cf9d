"""Prompt files: one JSON object a line, in any of the three layouts users bring.

A line may hold OpenAI `messages`, ShareGPT `conversations` (from/value) or a `prompt`
string. Its `sample_id` is the line's `id` or `sample_id` field, else its 1-based line
number, so it is stable across runs as long as the file is only appended to.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from gen_tui.backends.store.records import SampleId, sample_key, turn_key
from gen_tui.backends.watcher import (
    DATASET_NAME,
    MAX_PROMPT_LINE,
    BadFile,
    bounded_lines,
    open_named,
    prompt_fields,
)


class DatasetNameError(ValueError):
    """A dataset name that could not be used safely as a folder name and a shell word."""


def check_dataset_name(name: str) -> str:
    """Return `name` if it is a safe dataset name, else raise :class:`DatasetNameError`.

    Names become folder names locally and remotely and words on remote command lines, so
    only letters, digits, `.`, `_` and `-` are allowed, starting with a letter or digit.
    """
    if not DATASET_NAME.match(name) or name in {".", ".."}:
        raise DatasetNameError(
            f"dataset name {name!r} is not allowed: use letters, digits, '.', '_' and '-' "
            "(starting with a letter or digit, at most 128 characters)"
        )
    return name


@dataclass(frozen=True, slots=True)
class Prompt:
    sample_id: SampleId
    messages: list[dict[str, str]]
    line: int
    tokens: int | None = None
    """The templated prompt's length, once a tokenizer has counted it (see answer_cap.py)."""
    turn: int | None = None
    """With `--turns all`: which turn of its conversation this request is (1-based), its
    `messages` then the history `conversations.turn_messages` builds; None otherwise."""
    turns: int | None = None
    """With `--turns all`: how many turns its conversation has."""

    @property
    def key(self) -> str:
        return sample_key(self.sample_id)

    @property
    def record_key(self) -> str:
        """The key of the record this request's answer becomes: the sample's, or with
        `--turns all` its turn's (`conversations.turn_key`)."""
        return self.key if self.turn is None else turn_key(self.key, self.turn)


@dataclass(frozen=True, slots=True)
class PromptProblem:
    """A line that is not a usable prompt: skipped, counted and reported as file:line: reason."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def parse_prompt(raw: bytes, line: int) -> Prompt:
    """Parse one prompt line; raise ValueError with the reason (the caller adds file:line).

    The layouts, the sample id and the dropped trailing assistant turns are
    `watcher.prompt_fields`'s rule, which the watcher also applies on a GPU box.
    """
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    sample_id, messages = prompt_fields(obj, line)  # the rule, kept once in the watcher
    return Prompt(sample_id=sample_id, messages=messages, line=line)


class NotARegularFile(OSError):
    """A prompt file that is (or links to) a FIFO, a device or a folder; `strerror` is the
    one line that says which."""

    def __str__(self) -> str:
        return str(self.strerror)


READ_BUFFER = 1 << 20
"""Prompts are read in 1 MiB pieces: each read lets go of the GIL, and the feed's thread
then waits up to a switch interval (5 ms) for a busy event loop to hand it back."""


def open_prompt_file(path: Path) -> BinaryIO:
    """`path` opened to read, a regular file only (NotARegularFile, an OSError, otherwise).

    A prompt folder may be shared, and a plain open of a FIFO waits for a writer for ever.
    The rule is the watcher's `open_named`, the one the sample viewer's prompt heads use
    too: links followed (a dataset cache often holds its files as links) to a regular
    file, checked before the open and on the open descriptor, the open never waiting."""
    try:
        fd = open_named(os.fspath(path))
    except BadFile as exc:
        raise NotARegularFile(errno.EINVAL, str(exc), str(path)) from None
    return os.fdopen(fd, "rb", buffering=READ_BUFFER)


def iter_prompts(
    path: Path, skip: set[str] | None = None, max_line_bytes: int = MAX_PROMPT_LINE
) -> Iterator[Prompt | PromptProblem]:
    """Yield the prompts of `path` in file order, and a problem for each unusable line.

    Samples whose key is in `skip` (already done) are passed over without being parsed
    further than their id. Blank lines are not data and are passed over silently. A line
    longer than `max_line_bytes` is a problem, read past without being held in memory.
    """
    seen: dict[str, int] = {}
    with open_prompt_file(path) as handle:
        for line_no, raw in enumerate(bounded_lines(handle, max_line_bytes), start=1):
            if isinstance(raw, int):
                yield PromptProblem(
                    path, line_no, f"line is {raw:,} bytes, over the {max_line_bytes:,} allowed"
                )
                continue
            if not raw.strip():
                continue
            try:
                prompt = parse_prompt(raw, line_no)
            except ValueError as exc:
                yield PromptProblem(path, line_no, str(exc))
                continue
            key = prompt.key
            first = seen.get(key)
            if first is not None:
                yield PromptProblem(
                    path,
                    line_no,
                    f"duplicate sample_id {prompt.sample_id!r} (first at line {first})",
                )
                continue
            seen[key] = line_no
            if skip is not None and key in skip:
                continue
            yield prompt


_BLANK = re.compile(rb"\n(?=\n)")
"""A line break that ends a blank line (the next one starts at once)."""


def count_lines(path: Path, chunk: int = 1 << 20) -> int:
    """Non-empty lines of `path` (read in chunks, never held): the prompts it can give at
    most, for the "runs out of prompts" forecast. Raises OSError."""
    lines, last = 0, b"\n"
    with open_prompt_file(path) as handle:
        while data := handle.read(chunk):
            blank = sum(1 for _ in _BLANK.finditer(data)) + (last == data[:1] == b"\n")
            lines += data.count(b"\n") - blank
            last = data[-1:]
    return lines + (last != b"\n")


def discover_datasets(prompts_dir: Path) -> dict[str, Path]:
    """Map each `NAME.jsonl` of `prompts_dir` to its dataset name, in name order."""
    found: dict[str, Path] = {}
    for path in sorted(prompts_dir.glob("*.jsonl")):
        found[check_dataset_name(path.stem)] = path
    return found
