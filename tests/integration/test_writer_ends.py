"""`r` right after a watched run ends (issue 31): the panel said "pid N still writes it:
press k first" until the next survey of the host's processes, up to SURVEY_S (2 s) after
the run had exited. The run lets go of its dataset's lock as it ends, which the watcher
sees within its half-second poll: from then on the run is no writer, and the survey is
asked for at once (the run is listed as ended for `R`). A real `gen-tui run` to its budget;
the survey's own period set to 60 s, so that only the lock can tell it in time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.sim import LengthProfile
from tests.support.polling import wait_until
from tests.support.runs import finish, run_args, spawn


async def test_a_run_that_ended_is_no_writer_before_the_next_survey(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=3000, slots=16, profiles={"A": LengthProfile(mean=300)})
    out = tmp_path / "out"
    args = run_args(tokenizer_dir, prompts_dir(A=400), out, server.url, "--token-budget", "30k")
    process = await spawn(*args)
    await wait_until(lambda: (out / "A").is_dir(), 60, "the run's dataset folder")
    monitor = HostMonitor(LocalHost(out), survey_s=60.0)
    task = asyncio.create_task(monitor.run())
    try:
        await wait_until(lambda: monitor.writer("A") is not None, 30, "the run seen writing A")
        pid = process.pid
        code, _, err = await finish(process)
        assert code == 0, err
        ended = time.monotonic()
        await wait_until(lambda: monitor.writer("A") is None, 10, "the ended run let go of A")
        assert time.monotonic() - ended < 5.0  # the survey's own turn is 60 s away
        await wait_until(lambda: any(run.pid == pid for run in monitor.ended), 10, "R's run")
        totals = monitor.totals["A"]
        assert not totals.locked and totals.tokens >= 30_000
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
