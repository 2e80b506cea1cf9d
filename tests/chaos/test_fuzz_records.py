"""Fuzz record files in both layouts, damaged as crashes and full disks damage them: the
engine's scan counts exactly what an independent recount does or names the bad line, and the
remote watcher counts them the same way, line by line and appended in any pieces.

Property for each: the real function either returns what an independent oracle
(`oracle.py`) expects, or raises the module's own error type with a message that says where
(file, line, field). Any other exception, or a call that takes seconds, is a defect: it
would reach the user as a traceback or a hang. Example counts follow --chaos-iterations.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from gen_tui.backends import watcher
from gen_tui.backends.store.records import RecordFileError, scan_records

from .conftest import Examples
from .fuzzing import json_values, timed
from .oracle import ScanExpectation, is_cut, line_record


@st.composite
def record_lines(draw: st.DrawFn, engine_only: bool = False) -> bytes:
    """A record in the engine's layout, the seed's old layout, or something else entirely."""
    kinds = ["new"] if engine_only else ["new", "new", "old", "meta", "json", "garbage"]
    kind = draw(st.sampled_from(kinds))
    sample_id = draw(st.one_of(st.integers(0, 50), st.text('ab1-é"\\', min_size=1, max_size=4)))
    tokens = draw(st.integers(0, 6))
    if kind == "new":
        body = {"sample_id": sample_id, "completion_tokens": tokens, "prompt_tokens": 3}
        body["finish_reason"] = draw(st.sampled_from(["stop", "length", "abort", "lengthy"]))
        body["output_ids"] = list(range(tokens))
        body["text"] = draw(st.text(max_size=6))
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    if kind == "old":
        usage = {"prompt_tokens": 2, "completion_tokens": tokens}
        old: dict = {"sample_id": sample_id, "response": draw(st.sampled_from(["x", "length"]))}
        if draw(st.booleans()):
            old["finish_reason"] = draw(st.sampled_from(["stop", "length", None]))
        return json.dumps({**old, "usage": usage}).encode()
    if kind == "meta":
        meta: dict = {"completion_tokens": tokens}
        if draw(st.booleans()):
            meta["finish_reason"] = {"type": draw(st.sampled_from(["stop", "length"]))}
        return json.dumps({"id": sample_id, "meta_info": meta}).encode()
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    return draw(st.binary(max_size=20)).replace(b"\n", b"")


@st.composite
def record_files(draw: st.DrawFn, engine_only: bool = False) -> bytes:
    """Records joined by newlines, then damaged the ways crashes and full disks damage them:
    a torn end, and a write cut short with the next record glued on.

    Not bit flips inside a complete line: both fast scanners read only the head of a line
    in our layout (by design, for speed), so rot in a record's body is not theirs to find.
    Nor a non-record glued after a complete record: no writer makes that, and the record
    before it is whole (the scan counts it; a full parse would refuse the line).
    """
    lines = draw(st.lists(record_lines(engine_only), max_size=8))
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["tear-middle", "blank"]))
        if op == "tear-middle" and len(lines) >= 2:
            at = draw(st.integers(0, len(lines) - 2))
            if b'"completion_tokens"' in lines[at + 1]:
                cut = draw(st.integers(0, len(lines[at])))
                lines[at : at + 2] = [lines[at][:cut] + lines[at + 1]]
        elif op == "blank":
            at = draw(st.integers(0, len(lines)))
            lines.insert(at, draw(st.sampled_from([b"", b"  ", b"\r"])))
    data = b"".join(line + b"\n" for line in lines)
    if data and draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]  # a torn end
    return data


@given(record_files())
def test_record_scan_counts_exactly_or_names_the_bad_line(examples: Examples, data: bytes) -> None:
    examples()
    note(repr(data))
    expected = ScanExpectation(data)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "x").mkdir()
        path = Path(folder) / "x" / "raw_responses.jsonl"
        path.write_bytes(data)
        try:
            scan = timed(scan_records, path)
        except RecordFileError as exc:
            assert expected.error_line is not None, f"refused a readable file: {exc}"
            assert str(exc).startswith(f"{path}:{expected.error_line}: "), exc
            return
        assert expected.error_line is None, "a damaged line in the middle was not reported"
        assert (scan.done, scan.tokens, scan.records, scan.truncated) == (
            expected.keys,
            expected.tokens,
            expected.records,
            expected.truncated,
        )
        assert scan.duplicates == expected.duplicates
        assert (scan.valid_bytes, scan.torn_tail) == (expected.valid_bytes, expected.torn_tail)
        tail = watcher.DatasetTail(folder, "x")
        tail.poll()
        if not scan.torn_tail:
            # The remote watcher must count a sound file the same way. (A torn last line
            # glued to a record of another layout can fool its byte scan until the engine
            # quarantines the line; the engine's own records cannot: next test.)
            assert (tail.total_tokens, tail.total_samples, tail.total_truncated) == (
                scan.tokens,
                scan.records,
                scan.truncated,
            )


@given(record_files(engine_only=True))
def test_watcher_counts_damaged_engine_files_like_the_engine(
    examples: Examples, data: bytes
) -> None:
    examples()
    expected = ScanExpectation(data)
    assume(expected.error_line is None)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "x").mkdir()
        path = Path(folder) / "x" / "raw_responses.jsonl"
        path.write_bytes(data)
        scan = scan_records(path)
        tail = watcher.DatasetTail(folder, "x")
        tail.poll()
        assert (scan.tokens, scan.records, scan.truncated) == (
            expected.tokens,
            expected.records,
            expected.truncated,
        )
        assert (tail.total_tokens, tail.total_samples, tail.total_truncated) == (
            scan.tokens,
            scan.records,
            scan.truncated,
        )


@given(record_lines())
def test_watcher_reads_a_line_like_the_engine(examples: Examples, line: bytes) -> None:
    examples()
    found = line_record(line)
    assert watcher.record_figures(line) == (
        None if found is None else (found[1], is_cut(json.loads(line)))
    )


@given(record_files(engine_only=True), st.lists(st.integers(0, 10**6), max_size=6))
def test_watcher_tail_counts_appends_in_any_pieces_like_a_recount(
    examples: Examples, data: bytes, cuts: list[int]
) -> None:
    """Bytes arriving in arbitrary pieces (a live writer) end at the same totals."""
    examples()
    assume(ScanExpectation(data).error_line is None)
    points = sorted({cut % (len(data) + 1) for cut in cuts} | {len(data)})
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "x").mkdir()
        path = Path(folder) / "x" / "raw_responses.jsonl"
        path.write_bytes(b"")
        tail = watcher.DatasetTail(folder, "x")
        done = 0
        for point in points:
            with open(path, "ab") as handle:
                handle.write(data[done:point])
            done = point
            tail.poll()
        scan = scan_records(path)
        assert (tail.total_tokens, tail.total_samples, tail.total_truncated) == (
            scan.tokens,
            scan.records,
            scan.truncated,
        )


@pytest.mark.parametrize(
    "arg", ["A:1:2:3", "A:1:2:3:4", "A:x:1:1:1:0", "A:-1:0:0:0:0", "A\n:0:0:0:0:0", ""]
)
def test_watcher_refuses_bad_resume_arguments_with_a_value_error(arg: str) -> None:
    with pytest.raises(ValueError):
        watcher.parse_dataset_arg("/tmp", arg)
