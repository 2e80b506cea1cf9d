"""What the input fuzzers (tests/chaos/test_fuzz_*.py) share: JSON values of every shape,
the byte damage a bad copy or a crash does, hostile dataset names, and the check that no
parse takes long enough to be a hang waiting for a bigger input."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import strategies as st

from gen_tui.backends.store.progress_file import ProgressFile

SLOW_S = 1.0  # any single parse slower than this is a hang waiting for a bigger input
FLOOR_RATE = 2 * 2**20
"""Bytes a second any linear parse beats on a loaded machine: a call given `size` bytes may
take SLOW_S plus that many bytes at this rate. Why: the watcher's poll of a 10 MB hostile
record file took 1.6 s beside a second suite (1.0 s was its whole bound); a hang, or work
that grows with the square of the input, takes minutes there, not seconds."""

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),  # wider is a JSON library's range, not our rules
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def mutate(data: bytes, draw: st.DrawFn) -> bytes:
    """Cut, splice or overwrite a few bytes, as a bad copy or a crash would."""
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["cut", "insert", "flip", "delete"]))
        at = draw(st.integers(0, len(data)))
        if op == "cut":
            data = data[:at]
        elif op == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=6)) + data[at:]
        elif op == "flip" and at < len(data):
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        elif op == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 8)) :]
    return data


def timed(call: Any, *args: Any, size: int = 0, **kwargs: Any) -> Any:
    """`call(...)`'s result or exception, after checking it came in time either way (the
    check is not in a `finally`, where it would hide the call's own exception): within
    SLOW_S, plus `size` bytes (what it reads) at FLOOR_RATE."""
    bound = SLOW_S + size / FLOOR_RATE
    started = time.perf_counter()
    failure: Exception | None = None
    try:
        result = call(*args, **kwargs)
    except Exception as exc:  # judged by the caller, once the time is checked
        failure = exc
    elapsed = time.perf_counter() - started
    assert elapsed < bound, f"{call.__name__} took {elapsed:.2f} s on {args!r:.200}"
    if failure is not None:
        raise failure
    return result


hostile_names = st.one_of(
    st.text(max_size=140),
    st.text(alphabet="AB1._-\n\r\t $;|&`'\"\\/()<>*?~#!{}\x00\u200b\u202e\uff21é", max_size=12),
    st.sampled_from(
        ["..", ".", "B1\n", "B1\n\n", "B1\r", "-rf", "a/../b", "$(id)", "`id`", "a;b", "B1 ", ""]
    ),
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"),
)


# ---- hostile values others write (issue 30's fuzz tests) ----

WIDEST = 16
"""No drawn figure is this wide (the issue's 300-digit ones were)."""
BIG_LINE = 10 << 20
"""A line of 10 MB, with no newline, as another user's file may hold."""

hostile_numbers = st.one_of(
    st.floats(),  # NaN and ±inf included
    st.sampled_from([1e308, -1e308, 1.7976931348623157e308, 5e-324, -0.0, 2**63, -(2**63)]),
    st.integers(-(10**30), 10**30),
    st.integers(0, 2**64),
)
"""Numbers as Python values: JSON writes NaN and inf as `NaN` and `Infinity` (which
orjson refuses: a bad line), and integers of any size."""
number_texts = st.one_of(
    hostile_numbers.map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "inf", "1e999", "-1e999", "9" * 400, "0x10", ""]),
    st.text(alphabet="0123456789.eE+-", max_size=30),
)
"""Numbers as text, as Prometheus and nvidia-smi print them (or as a hostile one would)."""
escapes = st.sampled_from(["", "\x1b[2J", "\x1b]0;T\x07", "\x1b]52;c;AAAA\x07", "\u202e", "\x9b"])


def dump(value: object) -> str:
    return json.dumps(value)  # NaN and Infinity as JavaScript spells them


def progress_around(part: str) -> str:
    """A progress.json of an active dataset with 2 errors around a fuzzed `part` (its own
    keys and values, as JSON): what `progress_read` reads."""
    return '{"state": "active", "errors": 2, ' + part + "}"


def progress_read(text: str) -> ProgressFile | None:
    """`text` (from `progress_around`) as the watcher reads it, in time: None where it is
    not JSON at all (the watcher's reader refuses it before this); else the rest of the
    file reads whatever the fuzzed part holds (its 2 errors)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    progress = timed(ProgressFile.parse, value)
    assert progress is not None and progress.errors == 2  # the rest of the file reads
    return progress
