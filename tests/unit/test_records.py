from pathlib import Path

import orjson
import pytest

from gen_tui.backends.store.records import (
    Completion,
    RecordFileError,
    RecordWriter,
    quarantine_torn_tail,
    scan_records,
)


def _new(sample_id: object, tokens: int) -> bytes:
    return (
        orjson.dumps(
            {
                "sample_id": sample_id,
                "output_ids": [1] * tokens,
                "prompt_tokens": 5,
                "completion_tokens": tokens,
                "finish_reason": "stop",
            }
        )
        + b"\n"
    )


def _old(sample_id: object, tokens: int) -> bytes:
    return (
        orjson.dumps(
            {
                "sample_id": sample_id,
                "text": "x " * tokens,
                "usage": {"prompt_tokens": 5, "completion_tokens": tokens},
            }
        )
        + b"\n"
    )


def test_both_layouts_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(_new("a", 10) + _old("b", 20) + _new(3, 30))
    scan = scan_records(path)
    assert scan.tokens == 60
    assert scan.records == 3
    assert scan.done == {"a", "b", "3"}
    assert not scan.torn_tail


def test_absent_file_is_empty(tmp_path: Path) -> None:
    scan = scan_records(tmp_path / "none.jsonl")
    assert scan.records == 0 and scan.tokens == 0


def test_torn_tail_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    good = _new("a", 10) + _new("b", 5)
    torn = _new("c", 7)[:25]
    path.write_bytes(good + torn)
    scan = scan_records(path)
    assert scan.records == 2 and scan.tokens == 15
    side = quarantine_torn_tail(path, scan)
    assert side is not None and side.read_bytes() == torn
    assert path.read_bytes() == good
    assert scan_records(path).records == 2


def test_missing_final_newline_is_repaired_not_dropped(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(_new("a", 10) + _new("b", 5)[:-1])
    scan = scan_records(path)
    assert scan.records == 2
    assert quarantine_torn_tail(path, scan) is None
    assert path.read_bytes().endswith(b"}\n")
    writer = RecordWriter(path)
    writer.write(_new("c", 1))
    writer.close()
    assert scan_records(path).records == 3


def test_corrupt_middle_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(_new("a", 1) + b"{broken\n" + _new("b", 1))
    with pytest.raises(RecordFileError, match=r"raw.jsonl:2: not valid JSON"):
        scan_records(path)


def test_missing_field_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(_new("a", 1) + b'{"sample_id": "x"}\n' + _new("b", 1))
    with pytest.raises(RecordFileError, match=r":2: field 'completion_tokens'"):
        scan_records(path)


def test_duplicates_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(_new("a", 1) + _new("a", 2))
    scan = scan_records(path)
    assert scan.duplicates == 1 and scan.tokens == 3


def test_completion_line_layout() -> None:
    line = Completion("s1", 3, 4, "stop", [5, 6, 7], text="abc").to_line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    record = orjson.loads(line)
    assert list(record)[:5] == [
        "sample_id",
        "completion_tokens",
        "prompt_tokens",
        "finish_reason",
        "output_ids",
    ]


def test_scan_spanning_chunks(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    with open(path, "wb") as handle:
        for index in range(3000):
            handle.write(_new(index, 500))
    scan = scan_records(path)
    assert scan.records == 3000 and scan.tokens == 1_500_000


def test_fast_scan_agrees_with_a_full_parse(tmp_path: Path) -> None:
    import json

    tricky = ["plain", "ünïcode-✓", 'quote"inside', "back\\slash", "comma,id", 7, 0, 123456789]
    lines = [
        Completion(sid, 10 + i, 3, "stop", [1] * (10 + i)).to_line() for i, sid in enumerate(tricky)
    ]
    lines.append(_old("old-layout", 99))
    lines.append(b'{"completion_tokens": 5, "sample_id": "reordered", "output_ids": [1,2,3,4,5]}\n')
    lines.append(b'{"sample_id":"spaced" , "completion_tokens": 4}\n')
    path = tmp_path / "raw.jsonl"
    path.write_bytes(b"".join(lines))
    scan = scan_records(path)
    records = [json.loads(line) for line in lines]
    expected_tokens = sum(
        r.get("completion_tokens") or r["usage"]["completion_tokens"] for r in records
    )
    assert scan.tokens == expected_tokens
    assert scan.done == {str(r["sample_id"]) for r in records}
    assert scan.records == len(lines)


def test_fast_scan_does_not_accept_a_damaged_line(tmp_path: Path) -> None:
    path = tmp_path / "raw.jsonl"
    damaged = b'{"sample_id":"a","completion_tokens":5,"output_ids":[1,2\n'
    path.write_bytes(_new("x", 1) + damaged + _new("y", 1))
    with pytest.raises(RecordFileError, match=":2: not valid JSON"):
        scan_records(path)


def test_a_record_carries_a_crc32_of_its_bytes_that_catches_a_flipped_digit() -> None:
    from gen_tui.backends.store.records import Completion, seal_problem, sealed

    line = Completion("s1", 3, 5, "stop", [101, 202, 303], text="hi").to_line()
    assert sealed(line) and seal_problem(line) is None
    assert orjson.loads(line)["crc32"] == line[-11:-3].decode()
    flipped = line.replace(b"202", b"207")
    assert orjson.loads(flipped)["output_ids"] == [101, 207, 303]  # still a fine record
    assert "do not match its crc32" in (seal_problem(flipped) or "")
    unsealed = orjson.dumps({"sample_id": "s1", "completion_tokens": 3})
    assert not sealed(unsealed) and seal_problem(unsealed) is None
