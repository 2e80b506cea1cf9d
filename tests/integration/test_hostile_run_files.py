"""Someone else's names and values in a run's output folder, through every command that
prints them: `gen-tui report` (table, stderr, --html), `verify`, `export`, `run` (resume).

The attacks, found by an attacker's pass on a fresh clone (issue 16):
- a folder in a shared output folder named with an OSC title, an OSC 52 clipboard write,
  a C1 CSI (U+009B, two bytes of UTF-8) and a bidi override: report and verify listed it
  and printed its name raw in every line about it;
- one record line whose `sample_id` is a list of 200,000 strings (20 MB, still under the
  256 MiB line bound): the counting rule's reason quotes the value whole, and `gen-tui run`
  printed a 20,800,166-byte "one line" error, report 41 MB of stderr and a 45 MB page.
Real processes throughout: a finished real run, the real CLI, the simulator.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from tests.support.run_output import copy_run, gen_tui
from tests.support.runs import finish, run_args, spawn

HOSTILE_NAME = "E\x1b]0;TITLE\x07\x1b]52;c;aGk=\x07\u009b2J\u202eX"
# What no byte a terminal receives may hold: ESC, BEL, C1 controls (U+0080-U+009F as
# UTF-8), bidi embeddings, overrides and isolates.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HUGE_VALUE = ["x" * 100] * 200_000
LINE_BOUND = 4096
"""The longest line any command may print about one bad record (the reason quotes 500)."""


def plant_hostile_folder(out: Path) -> Path:
    """A copy of dataset A under a name full of escapes, as another user could make it."""
    folder = out / HOSTILE_NAME
    folder.mkdir()
    (folder / "raw_responses.jsonl").write_bytes((out / "A" / "raw_responses.jsonl").read_bytes())
    return folder


def assert_safe(text: str, what: str) -> None:
    found = UNSAFE.search(text)
    assert found is None, f"{what} holds {found.group()!r}: {text[:300]!r}"


def test_a_folder_named_with_escapes_is_said_once_and_never_printed_raw(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out = copy_run(finished_run, tmp_path)
    plant_hostile_folder(out)
    page = tmp_path / "report.html"
    for args in (
        ("report", "--output-dir", str(out), "--html", str(page)),
        ("verify", "--output-dir", str(out)),
        ("export", "--output-dir", str(out), "--format", "text", "--to", str(tmp_path / "x")),
    ):
        done = gen_tui(*args)
        stdout, stderr = done.stdout.decode(), done.stderr.decode()
        assert_safe(stdout, f"{args[0]}'s stdout")
        assert_safe(stderr, f"{args[0]}'s stderr")
        skipped = [line for line in stderr.splitlines() if "not a dataset name" in line]
        assert len(skipped) == 1, stderr
        assert "\\x1b]0;TITLE" in skipped[0] and "\\u202e" in skipped[0], skipped
        assert done.returncode == 0, stderr  # A and B are fine: the stranger is left out
    assert_safe(page.read_text(), "the report page")
    rows = [json.loads(line) for line in (tmp_path / "x").read_text().splitlines()]
    assert len(rows) == 100  # A's 60 and B's 40, not A's again under the stranger's name
    named = gen_tui("report", "--output-dir", str(out), "--datasets", HOSTILE_NAME)
    assert named.returncode == 1 and "is not a dataset name" in named.stderr.decode()
    assert_safe(named.stderr.decode(), "report --datasets' stderr")


def test_a_record_quoting_megabytes_costs_one_bounded_line(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out = copy_run(finished_run, tmp_path)
    raw = out / "A" / "raw_responses.jsonl"
    lines = raw.read_bytes().splitlines(keepends=True)
    bad = json.dumps({"sample_id": HUGE_VALUE, "completion_tokens": 5}).encode() + b"\n"
    assert len(bad) > 20_000_000
    raw.write_bytes(lines[0] + bad + b"".join(lines[1:]))
    page = tmp_path / "report.html"
    report = gen_tui("report", "--output-dir", str(out), "--html", str(page))
    export = gen_tui("export", "--output-dir", str(out), "--format", "text", "--to", "-")
    verify = gen_tui("verify", "--output-dir", str(out))
    for name, done in (("report", report), ("export", export), ("verify", verify)):
        stderr = done.stderr.decode()
        named = [line for line in stderr.splitlines() if f"{raw}:2:" in line]
        assert named, f"{name} does not name the line: {stderr[:500]}"
        assert max(len(line) for line in stderr.splitlines()) < LINE_BOUND, name
        assert len(stderr) < 16 * LINE_BOUND, f"{name}: {len(stderr):,} bytes of stderr"
    assert "field 'sample_id' must be a string or integer" in report.stderr.decode()
    assert "xx...xx" in report.stderr.decode()  # the cut is said (the quote is bounded)
    assert export.returncode == 1 and not export.stdout  # refused, no half export
    assert page.stat().st_size < 1_000_000, f"{page.stat().st_size:,} bytes of page"


async def test_a_resume_over_a_record_quoting_megabytes_says_one_bounded_line(
    finished_run: tuple[Path, Path], tokenizer_dir: Path, sim: Any, tmp_path: Path
) -> None:
    out = copy_run(finished_run, tmp_path)
    raw = out / "A" / "raw_responses.jsonl"
    first = raw.read_bytes().splitlines(keepends=True)[0]
    with open(raw, "ab") as handle:  # not the last line: a torn tail would be moved aside
        handle.write(
            json.dumps({"sample_id": "s", "completion_tokens": {"a": HUGE_VALUE}}).encode()
        )
        handle.write(b"\n" + first)
    before = raw.stat().st_size
    server = await sim()
    process = await spawn(*run_args(tokenizer_dir, finished_run[1], out, server.url))
    code, _, stderr = await finish(process)
    assert code == 1, stderr[:500]
    assert len(stderr) < LINE_BOUND and stderr.count("\n") == 1, f"{len(stderr):,} bytes"
    assert stderr.startswith(f"gen-tui: error: {raw}:61: field 'completion_tokens'"), stderr
    assert "xx...xx" in stderr  # the quote of the bad value is bounded, the cut shown
    assert raw.stat().st_size == before  # the damaged file is left for the user to see


def test_a_fifo_in_a_dataset_folder_is_one_line_not_a_hang(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """A FIFO named run_manifest.json or raw_responses.jsonl: verify and export waited on it
    for ever (a plain open of a FIFO blocks until a writer comes)."""
    for name in ("run_manifest.json", "raw_responses.jsonl"):
        out = copy_run(finished_run, tmp_path / name)
        fifo = out / "A" / name
        fifo.unlink()
        os.mkfifo(fifo)
        for args in (
            ("verify", "--output-dir", str(out)),
            ("export", "--output-dir", str(out), "--format", "text", "--to", str(tmp_path / "x")),
            ("report", "--output-dir", str(out)),
        ):
            if args[0] == "report" and name == "run_manifest.json":
                continue  # the report does not read the manifest
            done = gen_tui(*args)  # a hang fails here (subprocess timeout)
            said = [line for line in done.stderr.decode().splitlines() if "FIFO" in line]
            assert len(said) == 1 and f"{fifo} is a FIFO, not a regular file" in said[0], (
                args[0],
                done.stderr.decode(),
            )
            assert done.returncode == (0 if args[0] == "report" else 1), args[0]
