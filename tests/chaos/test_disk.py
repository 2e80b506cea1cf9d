"""Disk trouble: an output folder on a small tmpfs that fills up, and one that is read-only.

Real file systems, not patched calls: a tmpfs of a few hundred kB is mounted for each test
(root only; elsewhere the tests skip and say why). A full disk must pause the run, hold
the answers it has, leave every record written so far intact and no half line behind, and
go on by itself once space returns (or drain on SIGTERM and resume with the same command).
A read-only folder must be refused with one line before anything is sent; one that turns
read-only under a running engine (a read-only bind mount: the engine's open record file
still writes, new files cannot be made) must cost progress.json updates only, never a
record.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.demo import write_prompts
from tests.support.polling import wait_until_sync

from .checker import FolderState, check_folder, prompt_ids
from .procs import RunProcess, SimProcess, record_lines


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def mounts() -> Iterator[Callable[..., Path]]:
    """mounts(path, size) -> a fresh tmpfs at path (`size=None`: a bind mount of path onto
    itself); every mount is undone at the end, the last made first."""
    made: list[Path] = []

    def mount(path: Path, size: str | None) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        if size is None:
            result = _mount("--bind", str(path), str(path))
        else:
            result = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
        if result.returncode != 0:
            pytest.skip(f"cannot mount here (needs root): {result.stderr.strip()}")
        made.append(path)
        return path

    yield mount
    for path in reversed(made):
        subprocess.run(["umount", str(path)], capture_output=True, timeout=30)


def run_args(prompts: Path, tokenizer: Path, out: Path, url: str) -> list[str]:
    return [
        "--prompts-dir", str(prompts),
        "--tokenizer", str(tokenizer),
        "--output-dir", str(out),
        "--server-url", url,
        "--plain",
        "--concurrency", "8",
        "--max-new-tokens", "512",
    ]  # fmt: skip


@dataclass
class Setup:
    """One dataset "A" writing on a fresh tmpfs against its own simulator."""

    disk: Path
    prompts: Path
    ids: set[str]
    sim: SimProcess
    out: Path
    args: list[str]
    state: FolderState


def setup(
    tmp_path: Path,
    tokenizer_dir: Path,
    mounts: Callable[..., Path],
    size: str,
    count: int,
    slots: int,
    tokens_per_s: int,
) -> Setup:
    disk = mounts(tmp_path / "disk", size)
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", count)
    sim_args = ["--slots", str(slots), "--tokens-per-s", str(tokens_per_s)]
    sim = SimProcess(tmp_path / "sim", [*sim_args, "--default-mean", "100"]).start()
    out = disk / "out"
    return Setup(
        disk,
        prompts,
        prompt_ids(prompts / "A.jsonl"),
        sim,
        out,
        run_args(prompts, tokenizer_dir, out, sim.url),
        FolderState(out / "A"),
    )


def report(chaos_report: Any, scenario: str, ready: Setup, iterations: int, **extra: Any) -> None:
    """The scenario's row: what the folder holds now against the prompts."""
    records = ready.state.records_now()
    chaos_report(
        scenario=scenario,
        iterations=iterations,
        records_checked=len(records),
        lost=len(ready.ids - {record.sample_id for record in records}),
        duplicated=len(records) - len({record.sample_id for record in records}),
        **extra,
    )


def one_error_line(stderr: str, *needles: str) -> None:
    assert "Traceback" not in stderr, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gen-tui: error: "), stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]


def _wait_until(check: Callable[[], bool], run: RunProcess, what: str, timeout: float) -> None:
    """Wait for `check` while the run lives: its exit fails at once, naming the wait."""

    def held_while_alive() -> bool:
        if check():
            return True
        assert run.alive(), f"the run exited while waiting for {what}: {run.stderr()[-1500:]}"
        return False

    wait_until_sync(held_while_alive, timeout, what, detail=lambda: run.stdout()[-1500:])


def test_a_full_disk_pauses_the_run_holds_its_answers_and_it_resumes_when_space_returns(
    tmp_path: Path,
    tokenizer_dir: Path,
    mounts: Callable[..., Path],
    chaos_iterations: int,
    chaos_report: Any,
) -> None:
    """One run fills its disk `chaos_iterations` times and is given room each time.

    While the disk is full: the file ends on a whole line, nothing more is sent, and the
    answers already generated wait in memory. Once there is room, the run goes on by
    itself, and at the end every prompt has exactly one record and the server generated no
    answer twice (none was thrown away for lack of space).
    """
    ready = setup(tmp_path, tokenizer_dir, mounts, "96k", 120 * chaos_iterations + 200, 16, 2000)
    disk, ids, sim, state = ready.disk, ready.ids, ready.sim, ready.state
    args = [*ready.args, "--disk-probe", "0.2"]
    size_kb = 96
    fills = 0
    started = time.monotonic()
    run = RunProcess(tmp_path / "logs", "full", args)

    def written() -> bytes:
        return state.raw.read_bytes() if state.raw.exists() else b""

    def paused() -> bool:
        """Nothing sent and nothing written for 0.6 s, with the run still going."""
        before = (sim.stats()["requests"], written())
        time.sleep(0.6)
        return (sim.stats()["requests"], written()) == before and bool(before[1])

    try:
        for cycle in range(chaos_iterations):
            _wait_until(paused, run, f"full disk #{cycle + 1}", 120)
            fills += 1
            data = state.raw.read_bytes()
            assert data.endswith(b"\n"), "a half-written record was left behind"
            assert "dispatch paused" in run.stdout(), run.stdout()[-1500:]
            size_kb += 64
            assert _mount("-o", f"remount,size={size_kb}k", str(disk)).returncode == 0
            _wait_until(
                lambda data=data: state.raw.read_bytes() != data,
                run,
                f"records after room was made #{cycle + 1}",
                30,
            )
        # Said once every held answer is in, which is after the first of them reaches the file.
        _wait_until(
            lambda: "the disk has room again: dispatch resumed" in run.stdout(),
            run,
            "the line saying dispatch resumed",
            30,
        )
        assert _mount("-o", "remount,size=16m", str(disk)).returncode == 0
        rc = run.wait(timeout=180)
        assert rc == 0, run.stderr()[-2000:]
        assert "Traceback" not in run.stderr() + run.stdout()
        assert "could not be written" not in run.stdout()
        check_folder(state, ids, clean_exit=True, pid=run.pid)
        generated = sim.stats()["completed"]
    finally:
        run.signal(signal.SIGKILL)  # a no-op once it has exited; the mount must come free
        sim.stop()
    assert state.ever == ids
    records = state.records_now()
    assert generated == len(records) == len(ids), (generated, len(records), len(ids))
    report(
        chaos_report,
        "disk full",
        ready,
        chaos_iterations,
        disk_full_pauses=fills,
        generated_twice=generated - len(records),
        elapsed_s=round(time.monotonic() - started, 1),
    )


def test_a_run_stopped_on_a_full_disk_drains_and_resumes_later(
    tmp_path: Path, tokenizer_dir: Path, mounts: Callable[..., Path], chaos_report: Any
) -> None:
    """SIGTERM while answers wait for room: exit 0 at once, say how many were not kept, leave
    whole lines only; the same command resumes when there is room and loses nothing."""
    ready = setup(tmp_path, tokenizer_dir, mounts, "96k", 400, 16, 2000)
    disk, ids, sim, args, state = ready.disk, ready.ids, ready.sim, ready.args, ready.state
    run = again = RunProcess(tmp_path / "logs", "stopped", args)
    try:
        _wait_until(lambda: "No space left on device" in run.stdout(), run, "a full disk", 120)
        run.signal(signal.SIGTERM)
        assert run.wait(timeout=20) == 0, run.stderr()[-2000:]
        assert "Traceback" not in run.stderr() + run.stdout()
        assert "could not be written; they are generated again on resume" in run.stdout()
        check_folder(state, ids, clean_exit=False, pid=run.pid)  # progress.json had no room
        assert not state.torn, "a half-written record was left behind"
        assert _mount("-o", "remount,size=16m", str(disk)).returncode == 0
        again = RunProcess(tmp_path / "logs", "again", args)
        assert again.wait(timeout=180) == 0, again.stderr()[-2000:]
        check_folder(state, ids, clean_exit=True, pid=again.pid)
    finally:
        for process in (run, again):
            process.signal(signal.SIGKILL)
        sim.stop()
    assert state.ever == ids
    report(chaos_report, "disk full, stopped while waiting", ready, 1)


def test_a_read_only_folder_is_refused_and_a_folder_turning_read_only_loses_nothing(
    tmp_path: Path, tokenizer_dir: Path, mounts: Callable[..., Path], chaos_report: Any
) -> None:
    ready = setup(tmp_path, tokenizer_dir, mounts, "8m", 240, 8, 800)
    prompts, ids, sim, out, args, state = (
        ready.prompts,
        ready.ids,
        ready.sim,
        ready.out,
        ready.args,
        ready.state,
    )
    try:
        # Turns read-only under a running engine: a read-only bind mount over the folder.
        run = RunProcess(tmp_path / "logs", "turning", args)
        _wait_until(lambda: record_lines(out / "A") >= 40, run, "40 records", 90)
        mounts(out, None)
        assert _mount("-o", "remount,bind,ro", str(out)).returncode == 0
        rc = run.wait(timeout=120)
        assert rc == 0, run.stderr()[-2000:]
        assert "cannot write" in run.stdout() and "Read-only file system" in run.stdout()
        check_folder(state, ids, clean_exit=False, pid=run.pid)
        assert state.ever == ids and not state.torn

        # Read-only from the start: refused in one line, nothing touched.
        before = {path.name: path.read_bytes() for path in (out / "A").iterdir()}
        again = RunProcess(tmp_path / "logs", "refused", args)
        assert again.wait(timeout=60) == 1, again.stderr()[-2000:]
        one_error_line(again.stderr(), "Read-only file system")
        after = {path.name: path.read_bytes() for path in (out / "A").iterdir()}
        assert after == before
        fresh = out / "B"
        write_prompts(prompts / "B.jsonl", 5)
        refused = RunProcess(tmp_path / "logs", "fresh", [*args, "--datasets", "B"])
        assert refused.wait(timeout=60) == 1
        one_error_line(refused.stderr(), "Read-only file system")
        assert not os.path.exists(fresh)
    finally:
        sim.stop()
    report(chaos_report, "read-only output folder", ready, 1)
