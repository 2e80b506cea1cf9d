"""Prompt files: one JSON object a line, in any of the three layouts users bring.

A line may hold OpenAI `messages`, ShareGPT `conversations` (from/value) or a `prompt`
string. Its `sample_id` is the line's `id` or `sample_id` field, else its 1-based line
number, so it is stable across runs as long as the file is only appended to.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from gen_tui.backends.records import SampleId, sample_key
from gen_tui.backends.watcher import DATASET_NAME

_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "tool": "tool",
    "function_response": "tool",
}


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

    @property
    def key(self) -> str:
        return sample_key(self.sample_id)


@dataclass(frozen=True, slots=True)
class PromptProblem:
    """A line that is not a usable prompt: skipped, counted and reported as file:line: reason."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def _message_list(value: Any, field: str, role_key: str, text_key: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"field '{field}' must be a non-empty list")
    out: list[dict[str, str]] = []
    for index, turn in enumerate(value):
        if not isinstance(turn, dict):
            raise ValueError(f"field '{field}[{index}]' must be an object")
        role = turn.get(role_key)
        text = turn.get(text_key)
        if not isinstance(role, str) or role.lower() not in _ROLES:
            raise ValueError(f"field '{field}[{index}].{role_key}' has unknown role {role!r}")
        if not isinstance(text, str):
            raise ValueError(f"field '{field}[{index}].{text_key}' must be a string")
        out.append({"role": _ROLES[role.lower()], "content": text})
    while out and out[-1]["role"] == "assistant":
        out.pop()
    if not out:
        raise ValueError(f"field '{field}' holds no user turn to answer")
    return out


def parse_prompt(raw: bytes, line: int) -> Prompt:
    """Parse one prompt line; raise ValueError with the reason (the caller adds file:line).

    Trailing assistant turns are dropped: the engine regenerates the answer to the last
    user turn, which is what distillation data for a drafter needs.
    """
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError("line is not a JSON object")
    sample_id = obj.get("id", obj.get("sample_id", line))
    if sample_id is None:
        sample_id = line
    if isinstance(sample_id, bool) or not isinstance(sample_id, str | int):
        raise ValueError(f"field 'id' must be a string or integer, got {sample_id!r}")
    if "messages" in obj:
        messages = _message_list(obj["messages"], "messages", "role", "content")
    elif "conversations" in obj:
        messages = _message_list(obj["conversations"], "conversations", "from", "value")
    elif "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("field 'prompt' must be a non-empty string")
        messages = [{"role": "user", "content": prompt}]
        system = obj.get("system")
        if isinstance(system, str) and system:
            messages.insert(0, {"role": "system", "content": system})
    else:
        raise ValueError("no 'messages', 'conversations' or 'prompt' field")
    return Prompt(sample_id=sample_id, messages=messages, line=line)


MAX_LINE_BYTES = 8 << 20
"""The longest prompt line read: far beyond any context window a server takes, and small
enough that one runaway line (a whole file without newlines) costs little memory to skip."""


def _lines(handle: BinaryIO, limit: int) -> Iterator[bytes | int]:
    """Each line of `handle`, or its length in bytes where it is over `limit` (the line is
    read past in chunks, never held whole)."""
    while raw := handle.readline(limit + 1):
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
            continue
        size = len(raw)
        while (chunk := handle.readline(1 << 20)) and not chunk.endswith(b"\n"):
            size += len(chunk)
        yield size + len(chunk)


class NotARegularFile(OSError):
    """A prompt file that is a FIFO, a device or a folder."""

    def __str__(self) -> str:
        return f"{self.filename} is not a regular file"


def open_prompt_file(path: Path) -> BinaryIO:
    """`path` opened to read, a regular file only (NotARegularFile, an OSError, otherwise).

    A prompt folder may be shared, and a plain open of a FIFO waits for a writer for ever:
    the open does not wait, and what it opened is checked. Links are followed (a dataset
    cache often holds its files as links)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFile(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def iter_prompts(
    path: Path, skip: set[str] | None = None, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[Prompt | PromptProblem]:
    """Yield the prompts of `path` in file order, and a problem for each unusable line.

    Samples whose key is in `skip` (already done) are passed over without being parsed
    further than their id. Blank lines are not data and are passed over silently. A line
    longer than `max_line_bytes` is a problem, read past without being held in memory.
    """
    seen: dict[str, int] = {}
    with open_prompt_file(path) as handle:
        for line_no, raw in enumerate(_lines(handle, max_line_bytes), start=1):
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
