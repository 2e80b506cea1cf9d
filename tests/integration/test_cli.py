"""Real `gen-tui run` processes: killed, drained, refused, resumed, and fed bad input."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.sim import LengthProfile
from tests.support.locks import is_locked
from tests.support.polling import wait_until
from tests.support.records import progress, record_lines, recount
from tests.support.runs import finish, run_args, spawn


async def test_kill_9_mid_run_then_resume_loses_and_duplicates_nothing(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=3000, slots=32, profiles={"A": LengthProfile(mean=300)})
    prompts = prompts_dir(A=300)
    out = tmp_path / "out"
    args = run_args(tokenizer_dir, prompts, out, server.url, "--concurrency", "32")
    for kills in range(2):
        process = await spawn(*args)
        await wait_until(lambda k=kills: record_lines(out / "A") >= 60 * (k + 1))
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()
        assert process.returncode == -signal.SIGKILL
        assert not is_locked(out / "A" / "run.lock"), "the kernel did not drop the lock"
    process = await spawn(*args)
    code, stdout, stderr = await finish(process)
    assert code == 0, stderr
    tokens, records = recount(out / "A")
    assert records == 300
    assert progress(out / "A")["tokens"] == tokens
    assert progress(out / "A")["samples"] == 300
    assert "resuming with" in stdout
    side_files = list((out / "A").glob("raw_responses.jsonl.torn.*"))
    for side in side_files:
        assert "moved a torn last line" in stdout and str(side) in stdout


@pytest.mark.quick
async def test_sigterm_drains_in_flight_then_exits_0(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=400, slots=16, profiles={"A": LengthProfile(mean=300)})
    out = tmp_path / "out"
    process = await spawn(
        *run_args(tokenizer_dir, prompts_dir(A=500), out, server.url, "--concurrency", "16")
    )
    await wait_until(lambda: record_lines(out / "A") >= 10)
    await wait_until(lambda: server.stats.in_flight >= 8)
    process.send_signal(signal.SIGTERM)
    code, stdout, stderr = await finish(process)
    assert code == 0, stderr
    assert "draining" in stdout
    assert not is_locked(out / "A" / "run.lock")
    _, records = recount(out / "A")
    assert server.stats.aborted == 0
    assert records == server.stats.completed, "a completed response was not written"
    assert progress(out / "A")["state"] == "stopped"
    assert records < 500


async def test_second_signal_aborts_in_flight(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=50, slots=16, profiles={"A": LengthProfile(mean=2000)})
    out = tmp_path / "out"
    process = await spawn(
        *run_args(tokenizer_dir, prompts_dir(A=100), out, server.url, "--concurrency", "8")
    )
    await wait_until(lambda: server.stats.in_flight >= 8)
    process.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.5)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    code, stdout, stderr = await finish(process, timeout=30)
    assert code == 130, stderr
    assert time.monotonic() - started < 10
    assert "aborted" in stdout
    await wait_until(lambda: server.stats.in_flight == 0, timeout=10)
    assert server.stats.aborted >= 1
    _, records = recount(out / "A")
    assert records == server.stats.completed
    assert not is_locked(out / "A" / "run.lock")


async def test_second_writer_is_refused_naming_the_holder(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=100, slots=8)
    out = tmp_path / "out"
    args = run_args(tokenizer_dir, prompts_dir(A=100), out, server.url, "--concurrency", "4")
    first = await spawn(*args)
    await wait_until(lambda: is_locked(out / "A" / "run.lock"))
    second = await spawn(*args)
    code, _, stderr = await finish(second)
    assert code == 1
    assert f"already being written by pid {first.pid} on " in stderr
    assert "Traceback" not in stderr
    first.send_signal(signal.SIGINT)
    code, _, _ = await finish(first)
    assert code == 0


async def test_budget_stop_and_plain_log(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(profiles={"A": LengthProfile(mean=200)})
    out = tmp_path / "out"
    args = run_args(tokenizer_dir, prompts_dir(A=400), out, server.url, "--token-budget", "20k")
    code, stdout, stderr = await finish(await spawn(*args))
    assert code == 0, stderr
    assert "A: budget reached" in stdout
    assert "status: A budget reached: " in stdout  # the panel's words, not "done"
    tokens, _ = recount(out / "A")
    assert tokens >= 20_000
    code, stdout, _ = await finish(await spawn(*args))
    assert code == 0
    assert "already at its budget" in stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--token-budget", "10X"], "'10X' is not a number"),
        (["--datasets", "A,Nope"], "unknown dataset(s) Nope (known: A)"),
        (
            ["--tokenizer", "/nonexistent/tok"],
            "tokenizer directory '/nonexistent/tok' does not exist",
        ),
        (["--server-url", "http://127.0.0.1:9"], "no inference server reachable"),
        (["--prompts-dir", "/nonexistent"], "--prompts-dir /nonexistent is not a directory"),
        (["--budget-mode", "exact"], "invalid choice: 'exact'"),
    ],
)
async def test_bad_input_is_one_clear_line(
    extra: list[str],
    message: str,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    url = "http://127.0.0.1:9" if "--server-url" in extra else (await sim()).url
    extra = [word for word in extra if word not in ("--server-url", url)]
    args = run_args(tokenizer_dir, prompts_dir(A=3), tmp_path / "out", url, *extra)
    code, _, stderr = await finish(await spawn(*args))
    assert code in (1, 2)
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("gen-tui: error:") and message in lines[0], stderr


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o775])
async def test_a_dataset_folder_others_can_write_in_is_refused_in_one_line(
    mode: int, tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Anyone who can create names in a dataset folder can plant run.lock or a torn-tail
    name as a link to one of our files: the run refuses the folder before opening anything."""
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    (out / "A").chmod(mode)
    server = await sim()
    code, _, stderr = await finish(
        await spawn(*run_args(tokenizer_dir, prompts_dir(A=3), out, server.url))
    )
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1, stderr
    assert lines[0].startswith("gen-tui: error: A: ") and str(out / "A") in lines[0], stderr
    assert sorted(p.name for p in (out / "A").iterdir()) == []  # nothing was opened in it
    assert server.stats.completed == 0
