"""One hostile file in one dataset folder blinds or hangs nothing: the healthy dataset next to
it keeps exact totals and the bad one is reported, through the real watcher (as it runs on a
GPU box: its source on `python3 -`), the in-process survey, and a `HostMonitor` over the local
host and a real sshd.

Why: on a shared box anyone may leave in a dataset folder JSON nested 100,000 deep (it killed
the remote watcher in a loop, so no dataset had totals), a FIFO named run.lock or
progress.json (each survey hung for 60 s and leaked a blocked `python3 -`; locally `q` hung
for ever), a 10 MB progress.json (local watching froze at asyncio's 64 KiB line limit), or
fields of the wrong type (`"inflight": "many"` crashed the panel). A hang fails the test by
its timeout; no assertion is about time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gen_tui.backends import watcher
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.store.records import (
    LOCK_FILE,
    PROGRESS_FILE,
    RAW_FILE,
    scan_records,
)
from tests.support.polling import wait_until
from tests.support.runs import AnyHost
from tests.support.sshd import python38

KINDS = ["nested", "fifo", "big", "types"]
DEEP = 100_000
WRONG_TYPES = {"pid": "1", "state": 7, "inflight": "many", "errors": {}, "max_tokens": [1]}
WRONG_TYPES |= {"message": 5, "cost": "free", "budget_mode": None}


def _records(first: int, count: int) -> bytes:
    return b"".join(
        b'{"sample_id":%d,"completion_tokens":%d,"prompt_tokens":3}\n' % (i, 7 + i % 5)
        for i in range(first, first + count)
    )


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def plant(out: Path, kind: str) -> None:
    """GOOD, a sound dataset; BAD, the same with `kind` of hostile files."""
    for name in ("GOOD", "BAD"):
        folder = out / name
        folder.mkdir(parents=True)
        (folder / RAW_FILE).write_bytes(_records(0, 40))
        (folder / PROGRESS_FILE).write_text(json.dumps({"pid": 1, "state": "active"}))
        (folder / LOCK_FILE).write_text(json.dumps({"pid": 1, "host": "h"}))
    bad = out / "BAD"
    if kind == "nested":
        deep = b"[" * DEEP + b"]" * DEEP
        (bad / PROGRESS_FILE).write_bytes(b'{"state": ' + deep + b"}")
        (bad / LOCK_FILE).write_bytes(b'{"pid": ' + b"[" * 8000 + b"]" * 8000 + b"}")
        # A record line nested 100k deep in the middle of the record file.
        (bad / RAW_FILE).write_bytes(
            _records(0, 20) + b'{"sample_id": 99, "x": ' + deep + b"}\n" + _records(20, 20)
        )
    elif kind == "fifo":
        for name in (PROGRESS_FILE, LOCK_FILE, RAW_FILE):
            _fifo(bad / name)
        (out / watcher.LOG_DIR).mkdir()
        _fifo(out / watcher.LOG_DIR / watcher.START_SEQ)  # read by every survey of the host
    elif kind == "big":
        huge = json.dumps({"pid": 1, "message": "x" * (10 << 20)})
        (bad / PROGRESS_FILE).write_text(huge)
        (bad / LOCK_FILE).write_text(huge)
    else:
        (bad / PROGRESS_FILE).write_text(json.dumps(WRONG_TYPES))
        (bad / LOCK_FILE).write_text(json.dumps({"pid": "many", "host": ["h"]}))


@contextlib.contextmanager
def unblocking(out: Path) -> Iterator[None]:
    """After the test, keep releasing any reader blocked in a FIFO (a build without the fix):
    opening the write end lets its open() return. A daemon thread does it for two minutes, so
    a thread stuck there cannot hang pytest's exit; during the test nothing is released."""
    try:
        yield
    finally:
        fifos = [path for path in out.rglob("*") if path.is_fifo()]
        if fifos:
            threading.Thread(target=_release, args=(fifos,), daemon=True).start()


def _release(fifos: list[Path], seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for path in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        time.sleep(0.05)


def _run_watcher(*args: str) -> subprocess.CompletedProcess[str]:
    """The watcher as it runs on a GPU box: its source on the stdin of `python3 -`."""
    return subprocess.run(
        [python38() or "python3", "-", *args],
        input=watcher.source(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", KINDS)
def test_the_remote_watcher_reports_the_bad_dataset_and_counts_the_good_one(
    tmp_path: Path, kind: str
) -> None:
    out = tmp_path / "out"
    plant(out, kind)
    good = scan_records(out / "GOOD" / RAW_FILE)
    with unblocking(out):
        result = _run_watcher("--once", "--", str(out), "GOOD", "BAD")
        survey = _run_watcher(f"--ps={watcher.DEFAULT_PATTERN}", f"--output-dir={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert max(len(line) for line in result.stdout.splitlines()) < 48 << 10
    reports = {line["dataset"]: line for line in lines if line["type"] == "dataset"}
    assert (reports["GOOD"]["tokens"], reports["GOOD"]["samples"]) == (good.tokens, good.records)
    assert reports["GOOD"]["problem"] is None
    assert reports["GOOD"]["progress"] == {"pid": 1, "state": "active"}
    bad = reports["BAD"]
    if kind == "types":
        assert bad["problem"] is None  # wrong types cost the fields alone (ProgressFile)
        parsed = ProgressFile.parse(bad["progress"])
        assert parsed is not None and parsed.inflight is None and parsed.pid is None
        assert set(parsed.ignored) >= {"pid", "inflight", "errors", "max_tokens", "cost"}
    else:
        problem = bad["problem"]
        assert isinstance(problem, str) and "\n" not in problem
        assert PROGRESS_FILE in problem and LOCK_FILE in problem, problem
        assert bad["progress"] is None and bad["locked"] is False
    if kind == "nested":  # the deep line is one bad line; the others are counted
        assert (bad["tokens"], bad["samples"], bad["bad_lines"]) == (good.tokens, 40, 1)
    if kind == "fifo":
        assert RAW_FILE in bad["problem"] and (bad["exists"], bad["tokens"]) == (False, 0)
    assert survey.returncode == 0, survey.stderr[-2000:]
    locks = json.loads(survey.stdout)["locks"][str(out)]
    assert locks["GOOD"]["holder"] == {"pid": 1, "host": "h"}
    if kind != "types":
        assert locks["BAD"]["holder"] == {} and locks["BAD"]["locked"] is False


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_monitor_keeps_the_good_totals_next_to_a_hostile_folder(
    host: AnyHost, kind: str
) -> None:
    out = Path(host.output_dir)
    plant(out, kind)
    good = scan_records(out / "GOOD" / RAW_FILE)
    with unblocking(out):
        monitor = HostMonitor(host, survey_s=0.3)
        task = asyncio.create_task(monitor.run())
        try:
            await wait_until(
                lambda: {"GOOD", "BAD"} <= set(monitor.totals) and monitor.state == "connected",
                60,
                "both datasets reported",
            )
            totals = monitor.totals["GOOD"]
            assert (totals.tokens, totals.samples) == (good.tokens, good.records)
            for name in ("GOOD", "BAD"):
                assert monitor.snapshot(name) is not None  # wrong types crash nothing
            # The bad folder's problem reaches its panel's message, the good one's is clean.
            assert monitor.totals["GOOD"].problem is None
            if kind != "types":
                shown = monitor.snapshot("BAD").message  # type: ignore[union-attr]
                assert shown and shown == monitor.totals["BAD"].problem, shown
            # More records for both: the stream is alive, not frozen after the first line.
            for name in ("GOOD", "BAD"):
                if kind != "fifo" or name == "GOOD":
                    with open(out / name / RAW_FILE, "ab") as handle:
                        handle.write(_records(100, 10))
            good = scan_records(out / "GOOD" / RAW_FILE)
            await wait_until(
                lambda: (
                    (monitor.totals["GOOD"].tokens, monitor.totals["GOOD"].samples)
                    == (good.tokens, good.records)
                ),
                30,
                "GOOD's new records counted",
            )
            assert monitor.state == "connected"
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.wait_for(monitor.close(), 30)  # what `q` waits for


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", KINDS)
def test_progress_file_read_never_blocks_nor_raises(tmp_path: Path, kind: str) -> None:
    """The in-process reader (`ProgressFile.read`) reads as the watcher does."""
    out = tmp_path / "out"
    plant(out, kind)
    with unblocking(out):
        read = ProgressFile.read(out / "BAD" / PROGRESS_FILE)
    if kind == "types":
        assert read is not None and read.inflight is None and "inflight" in read.ignored
    else:
        assert read is None
    assert ProgressFile.read(out / "GOOD" / PROGRESS_FILE) == ProgressFile(
        pid=1, state=DatasetState.ACTIVE
    )
