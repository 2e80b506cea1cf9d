"""The stdlib watcher: its totals always equal a full recount (`scan_records`), it never re-reads
counted bytes, it runs on Python 3.8, and it is fast enough to attach to big folders."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends import watcher
from gen_tui.backends.hosts import DatasetTotals, LocalHost, WatchStatus
from gen_tui.backends.hosts.watch import dataset_totals
from gen_tui.backends.store.lock import DatasetLock
from gen_tui.backends.store.records import (
    RAW_FILE,
    Completion,
    quarantine_torn_tail,
    record_counts,
    scan_records,
    write_json_atomic,
)
from tests.support.sshd import python38


def new_line(sample_id: int, tokens: int) -> bytes:
    return Completion(sample_id, tokens, 7, "stop", list(range(tokens))).to_line()


def old_line(sample_id: int, tokens: int) -> bytes:
    record = {
        "sample_id": f"s{sample_id}",
        "response": 'text with "completion_tokens": 999 inside, and {braces}',
        "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": tokens + 5},
    }
    return json.dumps(record).encode() + b"\n"


def assert_matches_scan(tail: watcher.DatasetTail) -> None:
    scan = scan_records(Path(tail.path))
    assert (tail.total_tokens, tail.total_samples) == (scan.tokens, scan.records)


LINES = [
    b'{"sample_id": 1, "completion_tokens": 12, "output_ids": [1, 2]}',
    b'{"sample_id":1,"completion_tokens":0}',
    b'{"sample_id": "a", "usage": {"completion_tokens": 30}}',
    b'{"id": 4, "usage": {"completion_tokens": 30}}',
    b'{"sample_id": 5, "meta_info": {"completion_tokens": 8}}',
    b'{"sample_id": 5, "completion_tokens": 3, "usage": {"completion_tokens": 30}}',
    b'{"sample_id": 5, "completion_tokens": null, "usage": {"completion_tokens": 30}}',
    b'{"sample_id": 6, "text": "\\"completion_tokens\\": 77", "completion_tokens": 2}',
    b'{"sample_id": 7, "completion_tokens": -2}',
    b'{"sample_id": 7, "completion_tokens": 2.0}',
    b'{"sample_id": 7, "completion_tokens": 012}',
    b'{"sample_id": 7, "completion_tokens": true}',
    b'{"sample_id": 7, "completion_tokens": "3"}',
    b'{"sample_id": null, "completion_tokens": 3}',
    b'{"sample_id": 7.5, "usage": {"completion_tokens": 3}}',
    b'{"sample_id": 8, "completion_tokens" : 4}',
    b'{"completion_tokens": 4}',
    b'[{"sample_id": 8, "completion_tokens": 4}]',
    b'{"sample_id": 8, "completion_tokens": 4',
    b'{"sample_id": 9, "completion_tokens": 123456789012}',
    b"not json at all",
    b"   ",
]


@pytest.mark.parametrize("line", LINES)
def test_record_tokens_agrees_with_record_counts(line: bytes) -> None:
    try:
        expected: int | None = record_counts(orjson.loads(line))[1]
    except (ValueError, orjson.JSONDecodeError):
        expected = None
    assert watcher.record_tokens(line) == expected


def test_source_is_python38_and_stdlib_only() -> None:
    source = watcher.source()
    ast.parse(source, feature_version=(3, 8))
    imported = set(re.findall(r"^\s*(?:import|from) (\w+)", source, flags=re.M))
    assert imported <= {"__future__", "argparse", "contextlib", "fcntl", "json", "os", "re"} | {
        "socket",
        "subprocess",
        "sys",
        "time",
        "pwd",  # stdlib: the login names of run and file owners
        "signal",  # stdlib: the servers' exit wrapper (starts.EXIT_WRAPPER, its own program)
        "shutil",  # stdlib: which nvidia-smi
        "threading",  # stdlib: telemetry beside the watch loop
        "urllib",  # stdlib: the servers' /metrics read on the box
        "concurrent",  # stdlib: a router's workers' /metrics read side by side
        "reprlib",  # stdlib: a bad value quoted bounded as it is built
        "glob",  # stdlib: a virtual environment's site-packages, code a start takes
        "typing",  # stdlib: the annotations mypy checks (Any, IO, TypeVar...)
        "hashlib",  # stdlib: the hash of another user's command line cut in the ps report
        "http",  # stdlib: http.client, a /metrics GET whose socket a deadline can shut
        "tomllib",  # stdlib 3.11+ (a scan below it): a `gen-tui run --config`'s output_dir
        "tempfile",  # stdlib: --notice writes a drain notice whole (a temporary, then renamed)
    }


def test_totals_equal_a_recount_through_torn_tails_appends_and_repairs(tmp_path: Path) -> None:
    folder = tmp_path / "B2"
    folder.mkdir()
    path = folder / RAW_FILE
    path.write_bytes(b"".join(new_line(i, 10 + i) for i in range(50)) + old_line(50, 40))
    tail = watcher.DatasetTail(str(tmp_path), "B2")
    tail.poll()
    assert_matches_scan(tail)
    assert tail.total_samples == 51

    # A torn write: half a line. Not counted (as the full recount treats it), not committed.
    line = new_line(51, 500)
    with open(path, "ab") as handle:
        handle.write(line[:30])
    tail.poll()
    assert_matches_scan(tail)
    assert tail.offset == path.stat().st_size - 30

    # The rest arrives: counted exactly once.
    with open(path, "ab") as handle:
        handle.write(line[30:])
    tail.poll()
    assert_matches_scan(tail)
    assert tail.total_samples == 52

    # A complete record without its newline counts (provisionally), then commits.
    with open(path, "ab") as handle:
        handle.write(old_line(52, 60).rstrip(b"\n"))
    tail.poll()
    assert_matches_scan(tail)
    assert (tail.tail_samples, tail.total_samples) == (1, 53)
    with open(path, "ab") as handle:
        handle.write(b"\n")
    tail.poll()
    assert_matches_scan(tail)
    assert (tail.tail_samples, tail.offset) == (0, path.stat().st_size)

    # Counted bytes are never read again: change one already counted in place.
    before = tail.total_tokens
    with open(path, "r+b") as handle:
        data = handle.read(200)
        at = data.index(b'"completion_tokens":') + len(b'"completion_tokens":')
        handle.seek(at)
        handle.write(b"9")
    with open(path, "ab") as handle:
        handle.write(new_line(53, 5))
    tail.poll()
    assert tail.total_tokens == before + 5

    # A crash's torn tail moved aside by the engine's repair (the file shrinks): still exact.
    path.write_bytes(b"".join(new_line(i, 3) for i in range(10)))
    tail.poll()
    with open(path, "ab") as handle:
        handle.write(b'{"sample_id": 99, "completion_tok')
    tail.poll()
    assert_matches_scan(tail)
    quarantine_torn_tail(path, scan_records(path))
    with open(path, "ab") as handle:
        handle.write(new_line(10, 4))
    tail.poll()
    assert_matches_scan(tail)

    # A replaced file (new inode, larger than the offset) is recounted from zero.
    replacement = folder / "new.jsonl"
    replacement.write_bytes(b"".join(old_line(i, 100) for i in range(40)))
    os.replace(replacement, path)
    tail.poll()
    assert_matches_scan(tail)
    assert tail.total_samples == 40


def test_a_second_watcher_resumes_from_the_reported_offset(tmp_path: Path) -> None:
    (tmp_path / "A").mkdir()
    path = tmp_path / "A" / RAW_FILE
    path.write_bytes(b"".join(new_line(i, 7) for i in range(20)) + b'{"sample_id": 20, "compl')
    first = watcher.DatasetTail(str(tmp_path), "A")
    first.poll()
    resume = first.resume_arg()
    with open(path, "ab") as handle:
        handle.write(b'etion_tokens": 9}\n' + old_line(21, 11))
    second = watcher.parse_dataset_arg(str(tmp_path), resume)
    second.poll()
    assert second.offset > first.offset
    assert_matches_scan(second)
    with pytest.raises(ValueError, match="not allowed"):
        watcher.parse_dataset_arg(str(tmp_path), "B2;rm -rf ~")
    with pytest.raises(ValueError):
        watcher.parse_dataset_arg(str(tmp_path), "A:1:2")


def test_lock_holder_and_progress_are_reported(tmp_path: Path) -> None:
    folder = tmp_path / "B1"
    folder.mkdir()
    (folder / RAW_FILE).write_bytes(new_line(1, 5))
    write_json_atomic(folder / "progress.json", {"tokens": 5, "state": "active", "max_tokens": 9})
    lock = DatasetLock(folder / "run.lock")
    lock.acquire()
    try:
        tail = watcher.DatasetTail(str(tmp_path), "B1")
        tail.poll()
        tail.poll_meta(watcher.read_lock_table())
        report = tail.report(time.time())
        assert report is not None
        assert (report["locked"], report["lock_pid"]) == (True, os.getpid())
        assert report["progress"]["max_tokens"] == 9 and report["progress_fresh"]
        assert tail.report(time.time()) is None, "an unchanged dataset must not be reported again"
        # Without /proc/locks the watcher falls back to a non-blocking flock test.
        assert watcher.lock_status(str(folder / "run.lock"), None)[:2] == (True, os.getpid())
    finally:
        lock.release()
    tail.poll_meta(watcher.read_lock_table())
    assert not tail.locked
    assert watcher.lock_status(str(folder / "run.lock"), None)[0] is False


def test_progress_rides_along_only_when_it_changed(tmp_path: Path) -> None:
    """Issue 31: a record appended between two writes of progress.json made a line that
    repeated its ~3 KB, half the lines of a fleet of 64. A line carries it when it changed
    (or went), and the panel's side keeps the last one through the lines that do not."""
    folder = tmp_path / "B1"
    folder.mkdir()
    (folder / RAW_FILE).write_bytes(new_line(1, 5))
    progress = folder / "progress.json"
    write_json_atomic(progress, {"tokens": 5, "state": "active", "max_tokens": 9})
    tail = watcher.DatasetTail(str(tmp_path), "B1")

    def report() -> dict[str, Any]:
        tail.poll()
        tail.poll_meta(watcher.read_lock_table())
        line = tail.report(time.time())
        assert line is not None
        return line

    first = report()
    assert first["progress"]["max_tokens"] == 9
    with open(folder / RAW_FILE, "ab") as handle:
        handle.write(new_line(2, 7))
    second = report()
    assert second["tokens"] == 12 and "progress" not in second, second
    kept = dataset_totals(first).progress
    assert kept is not None and kept.max_tokens == 9
    assert dataset_totals(second, kept).progress is kept
    assert dataset_totals(second).progress is None, "nothing kept: nothing made up"
    write_json_atomic(progress, {"tokens": 12, "state": "active", "max_tokens": 19})
    os.utime(progress, (time.time() + 5, time.time() + 5))  # a later mtime, whatever the clock
    third = report()
    assert third["progress"]["max_tokens"] == 19
    progress.unlink()
    gone = report()
    assert "progress" in gone and gone["progress"] is None
    assert dataset_totals(gone, kept).progress is None, "a progress.json gone is gone"


def test_candidates_exclude_lookalikes() -> None:
    pattern = re.compile(watcher.DEFAULT_PATTERN)
    runs = [
        ["python", "run_inference.py", "--max-samples", "7000"],
        ["python3", "-u", "/home/u/run_inference.py"],
        ["/venv/bin/python", "/venv/bin/gen-tui", "run", "--datasets", "B2"],
        ["/venv/bin/python", "-m", "gen_tui.app.cli", "run", "--plain"],
    ]
    others = [
        ["tail", "-f", "run_inference.log"],
        ["grep", "run_inference"],
        ["vim", "run_inference.py"],
        ["bash", "-c", "python run_inference.py"],
        ["python", "run_inference_old.py"],
        ["gen-tui", "sim", "--port", "30000"],
    ]
    assert all(watcher.is_candidate(argv, pattern) for argv in runs)
    assert not any(watcher.is_candidate(argv, pattern) for argv in others)
    args = watcher.run_args(["x", "--datasets=B1,B2", "--output-dir", "out", "--prompts-dir", "p"])
    assert args == {
        "datasets": ["B1", "B2"],
        "prompts_dir": "p",
        "output_dir": "out",
        "config": None,
    }


def _write_big(folder: Path, names: list[str], megabytes: int) -> None:
    """Fast synthetic record files of both layouts (built from bytes, not json.dumps)."""
    for index, name in enumerate(names):
        (folder / name).mkdir(parents=True)
        chunks = []
        size = 0
        sample = 0
        while size < megabytes << 20:
            tokens = 200 + (sample * 7919) % 3000
            if index % 2:
                body = b'{"sample_id": %d, "response": "%s", "usage": {"prompt_tokens": 9, ' % (
                    sample,
                    b"x" * (tokens * 3),
                )
                line = body + b'"completion_tokens": %d, "total_tokens": 1}}\n' % tokens
            else:
                line = (
                    b'{"sample_id":%d,"completion_tokens":%d,"prompt_tokens":9,'
                    b'"finish_reason":"stop","output_ids":[%s]}\n'
                    % (sample, tokens, b",".join([b"12345"] * tokens))
                )
            chunks.append(line)
            size += len(line)
            sample += 1
        (folder / name / RAW_FILE).write_bytes(b"".join(chunks))


def _run_once(interpreter: str, output: Path, names: list[str]) -> dict[str, dict]:
    result = subprocess.run(
        [interpreter, "-", "--once", "--", str(output), *names],
        input=watcher.source(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["type"] == "hello"
    return {line["dataset"]: line for line in lines if line["type"] == "dataset"}


def test_attaching_to_eight_big_datasets_is_fast_and_exact(tmp_path: Path) -> None:
    names = [f"B{i}" for i in range(1, 9)]
    _write_big(tmp_path, names, 6)
    started = time.monotonic()
    reports = _run_once(sys.executable, tmp_path, names)
    elapsed = time.monotonic() - started
    for name in names:
        scan = scan_records(tmp_path / name / RAW_FILE)
        assert (reports[name]["tokens"], reports[name]["samples"]) == (scan.tokens, scan.records)
    # 48 MB; about 0.3 s here. The bound only catches a per-line json.loads regression.
    assert elapsed < 15, f"attach took {elapsed:.1f} s"


@pytest.mark.quick
def test_runs_on_python38(tmp_path: Path) -> None:
    interpreter = python38()
    if interpreter is None:
        pytest.skip("no Python 3.8 interpreter on this machine")
    (tmp_path / "A").mkdir()
    (tmp_path / "A" / RAW_FILE).write_bytes(
        b"".join(new_line(i, i + 1) for i in range(30))
        + b"".join(old_line(i, 2) for i in range(30, 40))
    )
    reports = _run_once(interpreter, tmp_path, ["A", "Missing"])
    assert (reports["A"]["tokens"], reports["A"]["samples"]) == (sum(range(1, 31)) + 20, 40)
    assert reports["Missing"]["exists"] is False
    result = subprocess.run(
        [interpreter, "-", f"--ps={watcher.DEFAULT_PATTERN}", f"--output-dir={tmp_path}"],
        input=watcher.source(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(result.stdout)["type"] == "ps"


async def _append_records(folder: Path, start: int, count: int) -> None:
    """Append records the way a crashing writer might: some in two writes, with pauses."""
    path = folder / RAW_FILE
    for i in range(start, start + count):
        line = new_line(i, 10 + i % 17) if i % 3 else old_line(i, 20)
        with open(path, "ab") as handle:
            if i % 5 == 0:
                handle.write(line[:25])
                handle.flush()
                await asyncio.sleep(0.02)
                handle.write(line[25:])
            else:
                handle.write(line)
        await asyncio.sleep(0.005)


@pytest.mark.quick
async def test_local_watch_streams_exact_totals_while_records_arrive(tmp_path: Path) -> None:
    for name in ("A", "B"):
        (tmp_path / name).mkdir()
        (tmp_path / name / RAW_FILE).write_bytes(b"".join(new_line(i, 5) for i in range(10)))
    host = LocalHost(tmp_path)
    watch = host.watch(str(tmp_path), ["A", "B"])
    watch.interval_s = 0.05
    watch.heartbeat_s = 0.2
    seen: list[DatasetTotals] = []
    statuses: list[str] = []

    async def consume() -> None:
        async for item in watch:
            if isinstance(item, WatchStatus):
                statuses.append(item.state)
            elif isinstance(item, DatasetTotals):  # (not the GPUs' "none here")
                seen.append(item)

    consumer = asyncio.create_task(consume())
    try:
        await asyncio.gather(
            _append_records(tmp_path / "A", 10, 120), _append_records(tmp_path / "B", 10, 80)
        )
        expected = {name: scan_records(tmp_path / name / RAW_FILE) for name in ("A", "B")}
        deadline = time.monotonic() + 20
        while any(
            (watch.totals.get(n) is None)
            or (watch.totals[n].tokens, watch.totals[n].samples)
            != (expected[n].tokens, expected[n].records)
            for n in ("A", "B")
        ):
            assert time.monotonic() < deadline, f"totals {watch.totals} != {expected}"
            await asyncio.sleep(0.05)
    finally:
        await watch.aclose()
        await consumer
    assert statuses[0] == "watching" and statuses[-1] == "closed"
    tokens_seen = [t.tokens for t in seen if t.dataset == "A"]
    assert tokens_seen == sorted(tokens_seen), "a total went down: something was counted twice"
    assert 1 < len(tokens_seen) < 400, "changes must be reported, not every poll"


def test_two_starts_relying_on_the_same_check_make_one_run(tmp_path: Path) -> None:
    """The start guard under contention: both read count 0, only the first to lock runs."""
    barrier = threading.Barrier(2)
    launched: list[str] = []
    outcomes: list[str] = []

    def start(name: str) -> None:
        barrier.wait()
        try:
            watcher.guarded_start(str(tmp_path), 0, lambda: launched.append(name))
            outcomes.append("started")
        except watcher.StaleStart as stale:
            outcomes.append(f"refused at {stale.seq}")

    threads = [threading.Thread(target=start, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["refused at 1", "started"]
    assert len(launched) == 1
    assert watcher.start_seq(str(tmp_path)) == 1
    watcher.guarded_start(str(tmp_path), None, lambda: None)  # relies on no check: counts
    assert watcher.start_seq(str(tmp_path)) == 2


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("[]", "--start takes a JSON object"),
        ('{"output_dir": "x", "log": "y"}', "--start needs argv"),
        ('{"argv": ["true"], "log": "y"}', "--start needs output_dir and log"),
        ('{"argv": ["true"], "output_dir": "x", "log": "y", "expect": "3"}', "expect must be"),
        ("{", "Expecting"),
    ],
)
def test_a_bad_start_request_is_named(spec: str, error: str, capsys: Any) -> None:
    assert watcher.main([f"--start={spec}"]) == 2
    line = json.loads(capsys.readouterr().out)
    assert line["type"] == "error" and error in line["message"]


def test_a_start_that_cannot_launch_says_why(tmp_path: Path, capsys: Any) -> None:
    spec = {"output_dir": str(tmp_path), "argv": [str(tmp_path / "nope")], "log": "l.log"}
    assert watcher.main(["--start=" + json.dumps({**spec, "cwd": str(tmp_path / "gone")})]) == 0
    assert json.loads(capsys.readouterr().out)["error"] == f"cannot cd into {tmp_path / 'gone'}"
    log = str(tmp_path / "logs" / "l.log")
    assert watcher.main(["--start=" + json.dumps({**spec, "log": log})]) == 0
    assert json.loads(capsys.readouterr().out)["error"].startswith(f"cannot start {tmp_path}/nope")
    assert watcher.start_seq(str(tmp_path)) == 0  # nothing ran, nothing counted
