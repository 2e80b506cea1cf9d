"""One counting rule: the engine's resume scan (`records.py`) and the remote watcher agree on
every record line, and an absurd count is a malformed line for both, never a total.

Why: they used to disagree on some lines (`007`, 2**70), and a `completion_tokens` of 10**30
marked a dataset done on resume and then crashed the engine. Each line here sits between two
sound records in a file, so the engine must either count it or refuse the file naming line 2,
and the watcher must count it the same way or call it a bad line.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gen_tui.backends import watcher
from gen_tui.backends.store.records import RAW_FILE, RecordFileError, scan_records

# Raw JSON text put where a sample id or a token count goes.
HOSTILE = [
    "0",
    "7",
    "007",
    "00",
    "-0",
    "-5",
    "10000000",
    "10000001",
    str(2**31),
    str(2**63 - 1),
    str(2**63),
    str(2**64 - 1),
    str(2**64),
    str(2**70),
    str(10**30),
    "9" * 400,
    "1e30",
    "1E2",
    "1e30 ",
    "7.0",
    "-1e30",
    "true",
    "false",
    "null",
    '"3"',
    '"007"',
    "[3]",
    "{}",
    "NaN",
    "Infinity",
]

# Record layouts, the value slots being {id} and {tokens}: the engine's own (the fast paths
# of both scanners), with blanks, the seed's `usage`, `meta_info`, and `id` for `sample_id`.
LAYOUTS = [
    '{{"sample_id":{id},"completion_tokens":{tokens},"prompt_tokens":3,"output_ids":[1]}}',
    '{{"sample_id": {id}, "completion_tokens": {tokens}, "prompt_tokens": 3}}',
    '{{"sample_id": {id}, "text": "x", "usage": {{"completion_tokens": {tokens}}}}}',
    '{{"id": {id}, "meta_info": {{"completion_tokens": {tokens}}}}}',
    '{{"completion_tokens":{tokens},"sample_id":{id}}}',
]

GOOD_BEFORE = b'{"sample_id":"before","completion_tokens":11,"prompt_tokens":1}\n'
GOOD_AFTER = b'{"sample_id":"after","completion_tokens":13,"prompt_tokens":1}\n'


def _verdicts(folder: Path, line: bytes) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """(engine, watcher): the line's (tokens, samples) counted, or None for malformed."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RAW_FILE
    path.write_bytes(GOOD_BEFORE + line + b"\n" + GOOD_AFTER)
    try:
        scan = scan_records(path)
    except RecordFileError as exc:
        assert f"{path}:2:" in str(exc), exc
        engine = None
    else:
        engine = (scan.tokens - 24, scan.records - 2)
    tail = watcher.DatasetTail(str(folder.parent), folder.name)
    tail.poll()
    if tail.bad_lines:
        assert (tail.bad_lines, tail.total_tokens, tail.total_samples) == (1, 24, 2)
        seen = None
    else:
        seen = (tail.total_tokens - 24, tail.total_samples - 2)
    return engine, seen


def _expected(sample_id: str, tokens: str) -> tuple[int, int] | None:
    """The rule restated: an integer id in the signed 64-bit range or a string, and an
    integer count in [0, 10**7] (strict JSON: no leading zeros, no NaN)."""

    def strict(text: str) -> object:
        return json.loads(text, parse_constant=_reject)

    try:
        id_value, tokens_value = strict(sample_id), strict(tokens)
    except ValueError:
        return None
    id_ok = isinstance(id_value, str) or (
        type(id_value) is int and -(2**63) <= id_value <= 2**63 - 1
    )
    tokens_ok = type(tokens_value) is int and 0 <= tokens_value <= 10**7
    return (tokens_value, 1) if id_ok and tokens_ok else None  # type: ignore[return-value]


def _reject(name: str) -> None:
    raise ValueError(name)


@pytest.mark.parametrize("layout", range(len(LAYOUTS)))
def test_engine_and_watcher_agree_on_every_count_shape(tmp_path: Path, layout: int) -> None:
    disagreements = []
    for index, (sample_id, tokens) in enumerate(itertools.product(HOSTILE, HOSTILE)):
        line = LAYOUTS[layout].format(id=sample_id, tokens=tokens).encode()
        engine, seen = _verdicts(tmp_path / f"d{index}", line)
        expected = _expected(sample_id, tokens)
        if not engine == seen == expected:
            disagreements.append((line, engine, seen, expected))
    assert not disagreements, disagreements[:5]


@given(
    st.integers(-(2**80), 2**80) | st.integers(-3, 10**7 + 3),
    st.integers(-(2**80), 2**80) | st.integers(-3, 10**7 + 3),
    st.sampled_from(range(len(LAYOUTS))),
)
def test_engine_and_watcher_agree_on_random_integers(
    tmp_path_factory: pytest.TempPathFactory, sample_id: int, tokens: int, layout: int
) -> None:
    line = LAYOUTS[layout].format(id=sample_id, tokens=tokens).encode()
    engine, seen = _verdicts(tmp_path_factory.mktemp("d") / "x", line)
    assert engine == seen == _expected(str(sample_id), str(tokens)), line


@pytest.mark.parametrize("tokens", [str(10**30), "1e30", str(10**7 + 1)])
def test_an_absurd_count_is_a_malformed_line_for_both(tmp_path: Path, tokens: str) -> None:
    line = b'{"sample_id":1,"completion_tokens":%s,"prompt_tokens":3}' % tokens.encode()
    assert _verdicts(tmp_path / "d", line) == (None, None)
    assert watcher.record_tokens(line) is None
    # As the last line it is a torn tail the engine moves aside: never counted, never "done".
    path = tmp_path / "last" / RAW_FILE
    path.parent.mkdir()
    path.write_bytes(GOOD_BEFORE + line + b"\n")
    scan = scan_records(path)
    assert (scan.tokens, scan.records, scan.done) == (11, 1, {"before"})
    assert scan.torn_tail == line + b"\n"
