"""A real `gen-tui run` keeps its timeline in history.jsonl, and a resume after kill -9
appends to it rather than starting over."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.sim import LengthProfile
from gen_tui.backends.store.history import read_history
from tests.support.polling import wait_until
from tests.support.records import record_lines, recount
from tests.support.runs import finish, run_args, spawn


async def test_history_survives_kill_9_and_the_resume_appends(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=3000, slots=16, profiles={"A": LengthProfile(mean=200)})
    prompts = prompts_dir(A=150)
    out = tmp_path / "out"
    args = run_args(tokenizer_dir, prompts, out, server.url, "--concurrency", "16")
    process = await spawn(*args)
    history = out / "A" / "history.jsonl"
    await wait_until(lambda: history.exists() and record_lines(out / "A") >= 40)
    os.kill(process.pid, signal.SIGKILL)
    await process.wait()
    killed = read_history(history).points
    assert killed and {p.pid for p in killed} == {process.pid}

    resumed = await spawn(*args)
    code, _, stderr = await finish(resumed)
    assert code == 0, stderr
    read = read_history(history)
    assert read.bad == 0, read.problems
    assert read.points[: len(killed)] == killed, "the resume rewrote the killed run's points"
    assert [p.pid for p in read.points][-1] == resumed.pid
    last = read.points[-1]
    tokens, records = recount(out / "A")
    assert (last.state, last.tokens, last.samples) == ("exhausted", tokens, records)
    assert all(a.t <= b.t for a, b in zip(read.points, read.points[1:], strict=False))
    assert all(a.tokens <= b.tokens for a, b in zip(read.points, read.points[1:], strict=False))
