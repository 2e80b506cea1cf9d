"""The record-counting rule: what one line of raw_responses.jsonl counts for.

Why a module of its own: the watcher's byte scan (:func:`record_figures`) and the engine's
resume scan (:func:`record_counts` and :func:`record_cut`, through records.py) must count a
dataset exactly alike, or the panel's totals, its share of answers cut at their cap and a
resumed run's budget disagree; all live here, beside the bounds that keep a hostile line
out of any total.
"""

from __future__ import annotations

import json
import reprlib

# The counting rule's bounds. No answer is ten million tokens long, so a bigger count is a
# damaged or hostile line (malformed, never a total: 10**30 once marked a dataset done),
# and a sample id is a signed 64-bit integer or a string, which every reader can hold.
MAX_COMPLETION_TOKENS = 10**7
SAMPLE_ID_MIN = -(2**63)
SAMPLE_ID_MAX = 2**63 - 1

CUT = "length"
"""The finish_reason of an answer cut at its cap: SGLang's `{"type": "length"}` (the
client keeps the type) and OpenAI's `"length"` alike."""

_KEY = b'"completion_tokens":'
_CUT_VALUE = b'"length"'
_SAMPLE_KEY = b'"sample_id":'
_DIGITS = b"0123456789"
_ENDS = (b",", b"}", b" ", b"\t", b"\r", b"\n")


# A bad value is quoted in its reason bounded as it is built (a 20 MB string or a list
# nested deep is never written out whole only to be cut by the caller).
def _quoter() -> reprlib.Repr:
    quoter = reprlib.Repr()
    quoter.maxstring = quoter.maxother = 60
    quoter.maxlist = quoter.maxdict = 4
    return quoter


_QUOTE = _quoter()


def quoted(value: object) -> str:
    """`value` as a reason quotes it: bounded as it is built (also `gen-tui verify`'s)."""
    return _QUOTE.repr(value)


def _integer_at(data: bytes, pos: int, limit: int) -> int | None:
    """The JSON integer in [0, limit] starting at `pos` (after blanks), or None if not one."""
    while data[pos : pos + 1] in (b" ", b"\t"):
        pos += 1
    end = pos
    while data[end : end + 1] and data[end : end + 1] in _DIGITS:
        end += 1
    if end == pos or data[end : end + 1] not in _ENDS:
        return None
    if end - pos > 1 and data[pos] == 48:  # a leading zero is not JSON
        return None
    if end - pos > 19:  # longer than any limit: no int() of a 10,000-digit number
        return None
    value = int(data[pos:end])
    return value if value <= limit else None


def _once(data: bytes, key: bytes) -> int:
    """Offset just past the only occurrence of `key` in `data`, or -1 (absent or repeated)."""
    at = data.find(key)
    if at < 0 or data.find(key, at + len(key)) >= 0:
        return -1
    return at + len(key)


def record_tokens(line: bytes) -> int | None:
    """Completion tokens of one record line in either layout, or None if it is not a record."""
    figures = record_figures(line)
    return figures[0] if figures is not None else None


def record_figures(line: bytes) -> tuple[int, bool] | None:
    """(completion tokens, cut at its cap) of one record line in either layout, or None if
    it is not a record.

    The rules are those of :func:`record_counts` and :func:`record_cut`. The fast path
    applies only when each key occurs exactly once in an object line: then that occurrence
    is the one `record_counts` reads (a key inside a JSON string always has its quotes
    escaped, so the byte pattern cannot match there). A line without the bytes `"length"`
    holds no such string value, so it is not cut (a writer would have to escape plain ASCII
    letters to hide one, as it would to hide a key: json and orjson never do); one with
    them is parsed. Anything else goes through `json`.
    """
    stripped = line.strip()
    if not stripped:
        return None
    # The first key must end in `":` too: a write cut short before it, with the next record
    # glued on (`{"sam{"sample_id":..}`), holds each key once but is no JSON.
    first_key_end = stripped.find(b'"', 2)
    if (
        stripped[:2] == b'{"'
        and stripped[-1:] == b"}"
        and stripped[first_key_end + 1 : first_key_end + 2] == b":"
    ):
        tokens_at = _once(stripped, _KEY)
        id_at = _once(stripped, _SAMPLE_KEY) if tokens_at >= 0 else -1
        if id_at >= 0:
            tokens = _integer_at(stripped, tokens_at, MAX_COMPLETION_TOKENS)
            pos = id_at
            while stripped[pos : pos + 1] in (b" ", b"\t"):
                pos += 1
            id_ok = (
                stripped[pos : pos + 1] == b'"'
                or _integer_at(stripped, pos, SAMPLE_ID_MAX) is not None
            )
            if tokens is not None and id_ok and stripped.find(_CUT_VALUE) < 0:
                return tokens, False
    return _json_figures(stripped)


def record_counts(record: object) -> tuple[str | int, int]:
    """(sample_id, completion_tokens) of a parsed record in either layout: the counting rule.

    A record is a JSON object with a `sample_id` (or `id`) that is a string or a signed
    64-bit integer, and an integer `completion_tokens` in [0, MAX_COMPLETION_TOKENS] at the
    top level, else in `usage`, else in `meta_info`. Raises ValueError naming the missing or
    wrong field. The engine's resume scan (`records.py`) and the watcher both count by it.
    """
    if not isinstance(record, dict):
        raise ValueError("record is not a JSON object")
    sample_id = record.get("sample_id", record.get("id"))
    if sample_id is None:
        raise ValueError("field 'sample_id' is missing")
    if isinstance(sample_id, bool) or not isinstance(sample_id, (str, int)):
        raise ValueError(
            "field 'sample_id' must be a string or integer, got %s" % (quoted(sample_id),)
        )
    if isinstance(sample_id, int) and not SAMPLE_ID_MIN <= sample_id <= SAMPLE_ID_MAX:
        raise ValueError("field 'sample_id' is out of the 64-bit range")
    tokens = record.get("completion_tokens")
    if tokens is None:
        usage = record.get("usage")
        if isinstance(usage, dict):
            tokens = usage.get("completion_tokens")
        if tokens is None:
            meta = record.get("meta_info")
            if isinstance(meta, dict):
                tokens = meta.get("completion_tokens")
    if tokens is None:
        raise ValueError("field 'completion_tokens' (or 'usage.completion_tokens') is missing")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(
            "field 'completion_tokens' must be a non-negative integer, got %s" % (quoted(tokens),)
        )
    if tokens > MAX_COMPLETION_TOKENS:
        raise ValueError(
            "field 'completion_tokens' is over %d, no answer is that long" % MAX_COMPLETION_TOKENS
        )
    return sample_id, tokens


def record_cut(record: object) -> bool:
    """Whether a parsed record is an answer cut at its cap: the truncation rule.

    Its `finish_reason` (at the top level, else in `meta_info`, where SGLang's native
    response keeps it) is CUT, as a string or as the `type` of an object. The engine's
    resume scan, the watcher and `gen-tui report` all judge a record by it.
    """
    if not isinstance(record, dict):
        return False
    reason = record.get("finish_reason")
    if reason is None:
        meta = record.get("meta_info")
        if isinstance(meta, dict):
            reason = meta.get("finish_reason")
    if isinstance(reason, dict):
        reason = reason.get("type")
    return reason == CUT


def _json_figures(line: bytes) -> tuple[int, bool] | None:
    try:
        record = json.loads(line)
        return record_counts(record)[1], record_cut(record)
    except (ValueError, RecursionError):  # not JSON, nested too deeply, or not a record
        return None
