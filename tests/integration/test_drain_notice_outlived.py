"""A drain notice never outlives its reason (issue 32): a real `gen-tui run` sent straight
to a simulator on this machine, and a notice for its port that nothing will remove. Left by
a writer that is gone (a panel killed mid-drain), the run ignores it at once, said in one
line; left by a writer that lives on (or one of another machine: not known here), the run,
with no other server, waits out the drain and grace the notice promised, then says so in
one line and sends again. Before, both runs waited for ever."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.drain_notice import OVERDUE_S, write_notice
from tests.support.runs import finish, run_args, spawn

PROMPTS = 30


def _notices(state: Path) -> Path:
    """The notices' folder a run with XDG_STATE_HOME=`state` reads."""
    return state / "gen-tui" / "servers" / "draining"


async def test_a_notice_whose_writer_is_gone_is_ignored_at_once(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=20000, slots=16)
    state = tmp_path / "state"
    # The writer, a process of its own that ends without removing it (as a panel killed
    # with kill -9 in the middle of a drain of 600 s would).
    script = (
        "import sys; from pathlib import Path; "
        "from gen_tui.backends.drain_notice import write_notice; "
        "write_notice(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], 600.0, 15.0)"
    )
    folder = _notices(state)
    args = [str(folder), str(server.port), server.url]
    writer = subprocess.run([sys.executable, "-c", script, *args], check=True, timeout=60)
    assert writer.returncode == 0
    notice = json.loads((folder / f"{server.port}.json").read_text())
    assert notice["writer"]["pid"] > 0 and notice["wait_s"] == 600.0
    out = tmp_path / "out"
    began = time.monotonic()
    run = await spawn(
        *run_args(tokenizer_dir, prompts_dir(A=PROMPTS), out, server.url),
        env={"XDG_STATE_HOME": str(state)},
    )
    code, stdout, stderr = await finish(run, 60)
    took = time.monotonic() - began
    assert code == 0, stderr[-2000:]
    gone = f"its writer (pid {notice['writer']['pid']}, this machine's) is gone"
    assert sum(gone in line for line in stdout.splitlines()) == 1, stdout[-3000:]
    assert "is being drained before a stop" not in stdout, stdout[-3000:]
    assert server.stats.completed == PROMPTS
    print(f"{PROMPTS} prompts in {took:.1f} s past a notice left by a dead writer")


async def test_a_run_with_no_other_server_waits_out_the_drain_it_was_promised(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=20000, slots=16)
    state = tmp_path / "state"
    wait_s, grace_s = 2.0, 1.0
    # Written by this process, alive all along: the notice's writer is not gone, yet no
    # one will remove it (its stop was cut short, or its host's link froze).
    write_notice(_notices(state), server.port, server.url, wait_s, grace_s)
    written = time.monotonic()
    out = tmp_path / "out"
    run = await spawn(
        *run_args(tokenizer_dir, prompts_dir(A=PROMPTS), out, server.url),
        env={"XDG_STATE_HOME": str(state)},
    )
    first: float | None = None
    while run.returncode is None and time.monotonic() - written < 60:
        if first is None and server.stats.requests:
            first = time.monotonic() - written
        await asyncio.sleep(0.05)
        if first is not None:
            break
    code, stdout, stderr = await finish(run, 60)
    assert code == 0, stderr[-2000:]
    assert first is not None, "the run never sent a request"
    promised = wait_s + grace_s + OVERDUE_S
    # Nothing sent while the notice held (the run's own start takes a second or two more).
    assert promised <= first < promised + 20, (first, promised)
    said = [line for line in stdout.splitlines() if "its drain notice is" in line]
    assert len(said) == 1, stdout[-3000:]
    assert "no other server is up: the notice is ignored, sent to again" in said[0], said
    assert "is being drained before a stop" in stdout, stdout[-3000:]
    assert server.stats.completed == PROMPTS
    print(f"first request {first:.1f} s after the notice (promised {promised:g} s): {said[0]}")
