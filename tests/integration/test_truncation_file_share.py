"""The share of answers cut at their cap covers the whole record file: a `gen-tui run` killed
and resumed keeps the share of the answers it wrote before the kill, and a foreign script's
run, watched locally and over SSH, shows its share as a gen-tui run does.

Why: a resumed run with 30% cut before the kill and none after used to read 0%, and a
script that was not gen-tui showed no share at all, though the training data is the file.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends import watcher
from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.progress.snapshot import DatasetSnapshot
from gen_tui.backends.sim import LengthProfile
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.store.records import RAW_FILE
from gen_tui.widgets.dataset_panel import truncation_piece
from gen_tui.widgets.quality_view import quality_text
from tests.support.polling import wait_until
from tests.support.records import read_records, record_lines, recount
from tests.support.runs import AnyHost, finish, run_args, spawn, standin_argv


def cut_count(folder: Path) -> int:
    """Records cut at their cap, counted with plain json (not the code under test)."""
    return sum(record.get("finish_reason") == "length" for record in read_records(folder))


async def watched(out: Path, dataset: str, samples: int) -> DatasetSnapshot:
    """The dataset as another process's panel sees it (the host monitor, as over SSH)."""
    monitor = HostMonitor(LocalHost(out), survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    try:
        return await wait_until(
            lambda: (
                (snap := monitor.snapshot(dataset)) is not None and snap.samples == samples and snap
            ),
            30,
            f"{dataset} watched at {samples} records",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_killed_and_resumed_run_keeps_the_share_cut_before_the_kill(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    # Mean 100 against a 64-token cap: most answers of the first run are cut; the resumed
    # run's 4,096 cuts none. About 0.5 s an answer, so the kill lands mid-run.
    server = await sim(tokens_per_s=150, slots=8, profiles={"A": LengthProfile(mean=100, cv=0.5)})
    prompts = prompts_dir(A=120)
    out = tmp_path / "out"
    first = await spawn(
        *run_args(tokenizer_dir, prompts, out, server.url, "--max-new-tokens", "64")
    )
    await wait_until(lambda: record_lines(out / "A") >= 24, 60, "answers before the kill")
    os.killpg(first.pid, signal.SIGKILL)  # a crash: nothing of the run's own state is saved
    await first.wait()
    before = read_records(out / "A")
    cut_before = cut_count(out / "A")
    assert 0 < len(before) < 120 and cut_before > len(before) * 0.3

    code, stdout, stderr = await finish(
        await spawn(*run_args(tokenizer_dir, prompts, out, server.url)), timeout=120
    )
    assert code == 0, stderr
    records = read_records(out / "A")
    assert len(records) == 120 and cut_count(out / "A") == cut_before  # none cut since
    print(f"cut before the kill {cut_before} of {len(before)}, after the resume {cut_before}/120")

    # the log: the resumed run warns at once, with the file's share (not its own 0 of 0)
    share = f"{cut_before / len(before):.0%} of answers ({cut_before} of {len(before)})"
    warned = [line for line in stdout.splitlines() if "cut at max_new_tokens" in line]
    assert warned and share in warned[0], stdout
    # progress.json, as the run wrote it last
    written = ProgressFile.read(out / "A" / "progress.json")
    assert written is not None
    assert (written.truncated, written.truncated_of) == (cut_before, 120)
    # the panel and the quality view of a watching panel
    snap = await watched(out, "A", 120)
    assert (snap.truncated, snap.truncated_of) == (cut_before, 120)
    piece = truncation_piece(snap)
    assert piece is not None and piece[1] == ("truncated-over",)
    assert f"{cut_before / 120 * 100:.0f}% cut" in piece[0]
    assert f"{cut_before} of 120 in the file" in quality_text(snap).plain


async def test_a_foreign_scripts_cut_share_shows_as_a_gen_tui_runs_does(
    host: AnyHost, standin: Path, tmp_path: Path
) -> None:
    out = Path(host.output_dir)
    identity = await host.start(
        standin_argv(standin, str(out), "B3", "--cut-every", "3"), str(tmp_path / "b3.log")
    )
    monitor = HostMonitor(host, survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    try:
        await wait_until(
            lambda: "B3" in monitor.totals and monitor.totals["B3"].samples >= 30, 30, "B3 counted"
        )
        await monitor.kill(identity, grace_s=10)
        samples = recount(out / "B3")[1]
        cut = cut_count(out / "B3")
        assert cut == (samples + 2) // 3  # the 1st, 4th, 7th... answer
        snap = await wait_until(
            lambda: (
                (found := monitor.snapshot("B3")) is not None and found.samples == samples and found
            ),
            20,
            "B3's totals equal a recount",
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert (snap.truncated, snap.truncated_of, snap.quality) == (cut, samples, None)
    piece = truncation_piece(snap)
    assert piece is not None and piece[1] == ("truncated-over",) and "% cut" in piece[0]
    view = quality_text(snap).plain
    assert "does not publish them" in view and f"{cut} of {samples} in the file" in view


def test_a_watcher_resumed_from_its_offset_keeps_the_cut_count(tmp_path: Path) -> None:
    """A reconnect restarts the watcher from `resume`: the cut records before its offset
    are carried in it, not lost nor counted twice."""
    folder = tmp_path / "B1"
    folder.mkdir()
    path = folder / RAW_FILE
    lines = [
        b'{"sample_id": %d, "usage": {"completion_tokens": 5}, "finish_reason": "%s"}\n'
        % (i, b"length" if i % 2 else b"stop")
        for i in range(10)
    ]
    path.write_bytes(b"".join(lines[:6]))
    first = watcher.DatasetTail(str(tmp_path), "B1")
    first.poll()
    assert (first.total_samples, first.total_truncated) == (6, 3)
    with open(path, "ab") as handle:
        handle.write(b"".join(lines[6:]))
    second = watcher.parse_dataset_arg(str(tmp_path), first.resume_arg())
    second.poll()
    assert (second.total_samples, second.total_truncated) == (10, 5)
    report = second.report(0.0)
    assert report is not None and report["truncated"] == 5
