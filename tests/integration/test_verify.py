"""`gen-tui verify` on a real run's output: clean, it says ok and exits 0; with each kind of
damage the chaos suite's record fuzzer makes (tests/chaos/test_fuzz_records.py: torn ends,
writes cut short with the next record glued on, garbage, JSON that is no record, the seed's
layouts) and each kind a field can go wrong, it names the file and line and exits 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.store.records import seal
from tests.support.run_output import copy_run, gen_tui
from tests.support.runs import finish, spawn

Lines = list[bytes]


def _edit(index: int, change: Callable[[dict, int], object]) -> Callable[[Lines, int], Lines]:
    """A record written wrong and sealed anyway (a buggy writer): the field checks name it."""

    def apply(lines: Lines, vocab: int) -> Lines:
        record = json.loads(lines[index])
        record.pop("crc32", None)
        change(record, vocab)
        lines[index] = seal(json.dumps(record, separators=(",", ":")).encode()) + b"\n"
        return lines

    return apply


def _flip_a_digit(lines: Lines, vocab: int) -> Lines:
    """Rot inside a body: one digit of an id changed, still valid JSON and a plausible id."""
    line = lines[5]
    at = line.index(b'"output_ids":[') + len(b'"output_ids":[')
    digit = line[at : at + 1]
    lines[5] = line[:at] + (b"1" if digit != b"1" else b"2") + line[at + 1 :]
    return lines


def _set(field: str, value: object) -> Callable[[dict, int], None]:
    return lambda record, vocab: record.__setitem__(field, value)


DAMAGE: dict[str, tuple[Callable[[Lines, int], Lines], int, str]] = {
    # kind: (damage, line named, words in the problem)
    "torn end": (lambda ls, v: [*ls[:-1], ls[-1][: len(ls[-1]) // 2]], 60, "torn last line"),
    "glued write": (lambda ls, v: [*ls[:9], ls[9][:40] + ls[10], *ls[11:]], 10, "not valid JSON"),
    "garbage": (
        lambda ls, v: [*ls[:4], b"\x00\xffgar\x1b[31mbage\n", *ls[4:]],
        5,
        "not valid JSON",
    ),
    "JSON, no record": (lambda ls, v: [*ls[:2], b"[1, 2]\n", *ls[2:]], 3, "not a JSON object"),
    "seed layout": (
        lambda ls, v: [*ls, b'{"sample_id": "A-0", "usage": {"completion_tokens": 3}}\n'],
        61,
        "seed script's layout",
    ),
    "meta layout": (
        lambda ls, v: [b'{"id": 7, "meta_info": {"completion_tokens": 3}}\n', *ls],
        1,
        "seed script's layout",
    ),
    "id past the vocabulary": (
        _edit(3, lambda r, v: r["output_ids"].__setitem__(0, v)),
        4,
        "outside the tokenizer's range",
    ),
    "id not an integer": (
        _edit(3, lambda r, v: r["output_ids"].__setitem__(0, 1.5)),
        4,
        "not an integer id",
    ),
    "ids short of the count": (
        _edit(5, lambda r, v: r["output_ids"].pop()),
        6,
        "ids but completion_tokens is",
    ),
    "duplicate": (lambda ls, v: [*ls, ls[7]], 61, "duplicate sample_id"),
    "a flipped digit in the ids": (_flip_a_digit, 6, "do not match its crc32"),
    "sample not in the prompts": (_edit(2, _set("sample_id", "A-999")), 3, "is not in"),
    "unknown finish_reason": (
        _edit(8, _set("finish_reason", "abort")),
        9,
        "not one a server sends",
    ),
    "negative count": (_edit(0, _set("completion_tokens", -1)), 1, "field 'completion_tokens'"),
    "text not a string": (_edit(0, _set("text", 5)), 1, "field 'text' must be a string"),
    # Any JSON type in any field verify reads is one line, never a traceback (a list as
    # finish_reason was unhashable and crashed it), and a huge value is quoted bounded.
    "finish_reason a list": (
        _edit(8, _set("finish_reason", ["length", {"a": [1] * 100}])),
        9,
        "field 'finish_reason' is ['length', {'a': [1, 1, 1, 1, ...]}]",
    ),
    "finish_reason an object": (
        _edit(8, _set("finish_reason", {"type": "stop"})),
        9,
        "field 'finish_reason' is {'type': 'stop'}, not one a server sends",
    ),
    "finish_reason 1 MB": (
        _edit(8, _set("finish_reason", "x" * 1_000_000)),
        9,
        "not one a server sends",
    ),
    "sample_id a list": (_edit(2, _set("sample_id", [1, 2])), 3, "field 'sample_id' must be"),
    "count an object": (_edit(0, _set("completion_tokens", {"n": 1})), 1, "completion_tokens"),
    "ids nested": (_edit(3, _set("output_ids", [[1, 2]])), 4, "not an integer id"),
    "reasoning an object": (
        _edit(0, _set("reasoning", {"x": 1})),
        1,
        "field 'reasoning' must be a string",
    ),
}


def verify(out: Path) -> tuple[int, list[str]]:
    done = gen_tui("verify", "--output-dir", str(out))
    return done.returncode, done.stderr.decode().splitlines()


@pytest.mark.quick
def test_a_clean_run_verifies(finished_run: tuple[Path, Path]) -> None:
    code, lines = verify(finished_run[0])
    assert (code, lines) == (0, ["A: 60 records, ok", "B: 40 records, ok"])


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_verify_names_each_kind_of_damage(
    finished_run: tuple[Path, Path], tmp_path: Path, vocab_size: int, kind: str
) -> None:
    damage, line_no, words = DAMAGE[kind]
    out = copy_run(finished_run, tmp_path)
    raw = out / "A" / "raw_responses.jsonl"
    raw.write_bytes(b"".join(damage(raw.read_bytes().splitlines(keepends=True), vocab_size)))
    code, lines = verify(out)
    assert code == 1
    assert lines[0].startswith("A: ") and lines[0].endswith("1 problem"), lines
    assert lines[1].startswith(f"  {raw}:{line_no}: ") and words in lines[1], lines
    assert "\x1b" not in "".join(lines)  # untrusted bytes are shown, never obeyed
    assert len(lines[1]) < 1000, "a quoted value is bounded"
    assert lines[2:] == ["B: 40 records, ok", "1 of 2 datasets have problems"]


def _openai_run_args(prompts: Path, out: Path, url: str, *extra: str) -> list[str]:
    return [
        "run",
        *("--api", "openai", "--model", "sim-model", "--server-url", url),
        *("--prompts-dir", str(prompts), "--output-dir", str(out), "--plain", *extra),
    ]


async def test_an_openai_run_without_tokenizer_verifies_and_a_lost_id_list_is_still_caught(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Issue 31, defect 21: an `--api openai` run without `--tokenizer` rightly writes no
    `output_ids` (its manifest's tokenizer is empty): its records verify. With a tokenizer
    the ids are written, and a record that lost them is still a problem."""
    server = await sim()
    prompts = prompts_dir(A=6)
    bare, tokenized = tmp_path / "bare", tmp_path / "tokenized"
    code, _, stderr = await finish(await spawn(*_openai_run_args(prompts, bare, server.url)))
    assert code == 0, stderr
    assert all("output_ids" not in json.loads(line) for line in _lines(bare / "A"))
    done = gen_tui("verify", "--output-dir", str(bare))
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    assert "A: 6 records, ok" in done.stderr.decode()

    args = _openai_run_args(prompts, tokenized, server.url, "--tokenizer", str(tokenizer_dir))
    code, _, stderr = await finish(await spawn(*args))
    assert code == 0, stderr
    lines = _lines(tokenized / "A")
    lines = _edit(2, lambda record, _: record.pop("output_ids"))(lines, 0)
    (tokenized / "A" / "raw_responses.jsonl").write_bytes(b"".join(lines))
    done = gen_tui("verify", "--output-dir", str(tokenized))
    assert done.returncode == 1
    assert "raw_responses.jsonl:3: field 'output_ids' is missing" in done.stderr.decode()


def _lines(folder: Path) -> Lines:
    return (folder / "raw_responses.jsonl").read_bytes().splitlines(keepends=True)
