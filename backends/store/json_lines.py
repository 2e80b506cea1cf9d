"""A JSON Lines file read line by line, as the batch journal and a batch's output file are:
each whole line parsed, blank ones passed over, and a line that does not parse told apart
as torn (the last one, with no newline after it: a crash or a cut download) or bad."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class JsonLine:
    """One non-blank line: its number (from 1), its value, or why it has none."""

    number: int
    value: Any = None
    parsed: bool = True
    torn: bool = False
    """It did not parse and is the last line, with no newline after it."""
    size: int = 0
    """Its bytes (said of a line that did not parse)."""


def json_lines(data: bytes) -> Iterator[JsonLine]:
    """Every non-blank line of `data`, parsed where it parses."""
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            yield JsonLine(number, orjson.loads(raw))
        except orjson.JSONDecodeError:
            yield JsonLine(number, parsed=False, torn=number == len(lines), size=len(raw))
