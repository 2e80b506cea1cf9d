"""Independent oracles for the fuzz tests, written with plain `json` and `str` methods.

Why not call the code under test to get the expected answer: an oracle that shares the
engine's parser shares its bugs. These re-state the documented rules (docs/, module
docstrings) from scratch, as simply as possible, and are held against the real functions.
"""

from __future__ import annotations

import json
import string
from typing import Any

SAFE_NAME_CHARS = set(string.ascii_letters + string.digits + "._-")
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1  # orjson's range: a wider integer is not JSON the engine can read


def dataset_name_ok(name: str) -> bool:
    """The name rule: letters, digits, '.', '_' and '-', starting with a letter or digit, <= 128."""
    return (
        0 < len(name) <= 128
        and all(char in SAFE_NAME_CHARS for char in name)
        and name[0] in string.ascii_letters + string.digits
    )


class _Reject(ValueError):
    pass


def _constant(_name: str) -> Any:
    raise _Reject("NaN/Infinity are not JSON")


def _int(text: str) -> int:
    value = int(text)
    if not _INT_MIN <= value <= _INT_MAX:
        raise _Reject("integer out of range")
    return value


def _strings_ok(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, list):
        return all(_strings_ok(item) for item in value)
    if isinstance(value, dict):
        return all(_strings_ok(key) and _strings_ok(item) for key, item in value.items())
    return True


def strict_json(raw: bytes) -> tuple[bool, Any]:
    """(True, value) if `raw` is strict UTF-8 JSON the engine can read, else (False, None)."""
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, parse_constant=_constant, parse_int=_int)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False, None
    if not _strings_ok(value):
        return False, None
    return True, value


def record_tokens(value: Any) -> tuple[str, int] | None:
    """(sample key, completion tokens) of a parsed record in either layout, or None."""
    if not isinstance(value, dict):
        return None
    sample_id = value["sample_id"] if "sample_id" in value else value.get("id")
    if sample_id is None or isinstance(sample_id, bool) or not isinstance(sample_id, str | int):
        return None
    if isinstance(sample_id, int) and not -(2**63) <= sample_id < 2**63:
        return None  # docs/run.md: an integer sample id is a signed 64-bit one
    tokens = value.get("completion_tokens")
    if tokens is None and isinstance(value.get("usage"), dict):
        tokens = value["usage"].get("completion_tokens")
    if tokens is None and isinstance(value.get("meta_info"), dict):
        tokens = value["meta_info"].get("completion_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= 10**7:
        return None  # no answer is over ten million tokens: such a line is malformed
    return str(sample_id), tokens


def line_record(line: bytes) -> tuple[str, int] | None:
    ok, value = strict_json(line)
    return record_tokens(value) if ok else None


def is_cut(value: Any) -> bool:
    """docs/run.md, truncation: an answer is cut at its cap when its finish_reason (top level, else
    meta_info's) is "length", or an object whose type is "length" (SGLang's)."""
    reason = value.get("finish_reason")
    if reason is None and isinstance(value.get("meta_info"), dict):
        reason = value["meta_info"].get("finish_reason")
    if isinstance(reason, dict):
        reason = reason.get("type")
    return isinstance(reason, str) and reason == "length"


class ScanExpectation:
    """What a scan of a record file must find: counts, or the line a clear error must name."""

    def __init__(self, data: bytes) -> None:
        self.error_line: int | None = None
        self.keys: set[str] = set()
        self.tokens = 0
        self.records = 0
        self.truncated = 0
        self.duplicates = 0
        self.valid_bytes = 0
        self.torn_tail = b""
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()  # the file ends with a newline: no partial last line
        offset = 0
        for index, line in enumerate(lines):
            last = index == len(lines) - 1
            end = offset + len(line) + (0 if last and not data.endswith(b"\n") else 1)
            if line.strip():
                found = line_record(line)
                if found is None:
                    if last:
                        self.valid_bytes = offset
                        self.torn_tail = data[offset:]
                    else:
                        self.error_line = index + 1
                    return
                key, tokens = found
                self.truncated += is_cut(json.loads(line))
                self.duplicates += key in self.keys
                self.keys.add(key)
                self.tokens += tokens
                self.records += 1
            self.valid_bytes = end
            offset = end
