"""Issue 31, point 7's residual: the header said IDLE (done 8/9) while a detached local run,
started with `r` and still writing, had answers in flight: the header read only the runs of
this process. A live run writing a watched dataset now makes it RUNNING, with its pid and
its requests in flight of its limit (its progress.json's pool).

The real app over a real config file, a real detached `gen-tui run` against the simulator
(slow enough to stay up), the panel's local link watching the config's output folder.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import orjson

from gen_tui.backends.sim import SimServer
from gen_tui.widgets.header import RunHeader, header_parts
from tests.support.polling import wait_until
from tests.support.tui import SIZE
from tests.support.watched_run import watched_run


async def test_a_detached_run_writing_a_watched_dataset_makes_the_header_running(
    tmp_path: Path,
    sim: Callable[..., object],
    prompts_dir: Callable[..., Path],
    tokenizer_dir: Path,
) -> None:
    """IDLE before; RUNNING with the detached run's pid while it writes; IDLE again once it
    is killed (its panel then says so too)."""
    server = await sim(tokens_per_s=20, slots=4)  # type: ignore[misc]
    assert isinstance(server, SimServer)
    with watched_run(tmp_path, server.url, tokenizer_dir, prompts_dir(A=400)) as watched:
        app, link = watched.app, watched.link
        async with app.run_test(size=SIZE) as pilot:
            header = app.query_one("#header", RunHeader)
            await pilot.pause(1.0)
            assert header.view.state == "idle", header.view
            run = watched.start()
            await wait_until(
                lambda: header.view.state == "running", 60, "the header says RUNNING",
                pause=pilot.pause, detail=lambda: (link.state, header.view),
            )  # fmt: skip
            assert f"pid {run.pid} on " in header.view.where, header.view
            # Its requests in flight of its limit, as its progress.json's pool says them:
            # the header said RUNNING and the pid but no "in flight" (issue 31, panel).
            await wait_until(
                lambda: header.view.concurrency > 0, 60, "the header says the run's pool",
                pause=pilot.pause, detail=lambda: header.view,
            )  # fmt: skip
            pool = orjson.loads((watched.out / "A" / "progress.json").read_bytes())["pool"]
            assert header.view.concurrency == pool["concurrency"], (header.view, pool)
            assert 0 <= header.view.inflight <= header.view.concurrency, header.view
            shown = header_parts(header.view)
            assert any(part.startswith("in flight ") for part in shown), shown
            assert not app.runs, "the run is the detached process's, not this one's"
            assert run.poll() is None, "the detached run goes on"

            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
            await wait_until(
                lambda: header.view.state == "idle", 60, "IDLE once the run is gone",
                pause=pilot.pause, detail=lambda: header.view,
            )  # fmt: skip
