"""`gen-tui verify` on any JSON type in any field it reads, of a record or of the manifest.

A record file and its run_manifest.json may be written by a buggy script, or planted by
someone else in a shared folder. Whatever type a field holds (null, a boolean, a float, an
integer past 64 bits, a megabyte string with terminal escapes, a list, an object), verify
must say what is wrong in one bounded line naming the file (and line), never crash with a
traceback. Before: a manifest whose `tokenizer` was a list or an object crashed verify
(unhashable), one whose `prompts` was a number crashed it in `Path()`, and the engine
crashed opening a dataset whose manifest had a number as `servers`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.export.verify import verify_dataset
from gen_tui.backends.store.manifest import RunSetup, record_setup
from gen_tui.backends.store.records import seal
from tests.support.run_output import copy_run, gen_tui

HOSTILE: list[Any] = [
    None,
    True,
    1.5,
    -1,
    10**30,
    "\x1b]52;c;cHduZWQ=\x07\x1b[2J" + "x" * 1_000_000,
    [],
    [1, [2, {"a": None}]],
    {"type": "stop", "n": [1] * 1000},
]
RECORD_FIELDS = [
    "sample_id",
    "completion_tokens",
    "prompt_tokens",
    "finish_reason",
    "output_ids",
    "text",
    "reasoning",
]
MANIFEST_FIELDS = [
    "prompts",
    "prompts_sha256",
    "tokenizer",
    "chat_template_sha256",
    "sampling",
    "api",
    "model",
    "servers",
]
TOP_FIELDS = ["version", "dataset", "runs"]


def _lines_ok(lines: list[str]) -> None:
    for line in lines:
        assert "\n" not in line and "\x1b" not in line and "\x07" not in line, line[:200]
        assert len(line) < 3000, f"a line of {len(line)} characters"


@pytest.fixture(scope="module")
def run_copy(finished_run: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_run(finished_run, tmp_path_factory.mktemp("verify_types"))


def _with(path: Path, text: bytes, check: Any) -> None:
    """Run `check()` with `path` holding `text`, then put the file back."""
    before = path.read_bytes()
    path.write_bytes(text)
    try:
        check()
    finally:
        path.write_bytes(before)


@pytest.mark.parametrize("field", [*RECORD_FIELDS, "output_ids[0]"])
def test_any_type_in_a_record_field_is_one_line(run_copy: Path, field: str) -> None:
    folder = run_copy / "A"
    raw = folder / "raw_responses.jsonl"
    lines = raw.read_bytes().splitlines(keepends=True)
    for value in HOSTILE:
        record = json.loads(lines[2])
        record.pop("crc32", None)
        if field == "output_ids[0]":
            record["output_ids"][0] = value
        else:
            record[field] = value
        bad = seal(json.dumps(record, separators=(",", ":")).encode()) + b"\n"

        def check(value: Any = value) -> None:
            verdict = verify_dataset(folder, {})
            _lines_ok(verdict.first)
            if field not in ("text", "reasoning") or not isinstance(value, str | None):
                assert verdict.problems >= 1, (field, repr(value)[:80])
                assert verdict.first[0].startswith(f"{raw}:3: "), verdict.first

        _with(raw, b"".join([*lines[:2], bad, *lines[3:]]), check)


@pytest.mark.parametrize("field", MANIFEST_FIELDS + TOP_FIELDS)
def test_any_type_in_a_manifest_field_is_one_line(run_copy: Path, field: str) -> None:
    folder = run_copy / "A"
    manifest = folder / "run_manifest.json"
    payload = json.loads(manifest.read_text())
    for value in HOSTILE:
        changed = json.loads(json.dumps(payload))
        if field in TOP_FIELDS:
            changed[field] = value
        else:
            changed["runs"][0][field] = value

        def check(value: Any = value) -> None:
            verdict = verify_dataset(folder, {})
            _lines_ok(verdict.first)

        _with(manifest, json.dumps(changed).encode(), check)


def test_verify_on_a_manifest_of_the_wrong_types(run_copy: Path, tmp_path: Path) -> None:
    """Through the command: one line naming the manifest and the field, exit 1."""
    out = copy_run((run_copy, run_copy), tmp_path)
    manifest = out / "A" / "run_manifest.json"
    payload = json.loads(manifest.read_text())
    payload["runs"][0]["tokenizer"] = ["not", "a", "path"]
    manifest.write_text(json.dumps(payload))
    done = gen_tui("verify", "--output-dir", str(out))
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1, lines
    assert "Traceback" not in done.stderr.decode()
    assert lines[1] == (
        f"  {out / 'A'}: {manifest}: field 'tokenizer' of a run entry must be a string, got "
        "['not', 'a', 'path']"
    ), lines


def test_a_run_opening_a_manifest_of_the_wrong_types_starts_it_again(run_copy: Path) -> None:
    """The engine notes its setup in the manifest as it opens a dataset: a number as
    `servers` crashed it there (`url not in 5`); now the manifest is unreadable, so it is
    started again."""
    folder = run_copy / "A"
    manifest = folder / "run_manifest.json"
    payload = json.loads(manifest.read_text())
    setup = RunSetup.from_payload(payload["runs"][0], str(manifest))
    payload["runs"][0]["servers"] = 5

    def check() -> None:
        record_setup(folder, "A", setup, records=60)
        runs = json.loads(manifest.read_text())["runs"]
        assert [run["servers"] for run in runs] == [setup.servers]

    _with(manifest, json.dumps(payload).encode(), check)
