"""Issue 31, point 7's residual: the header said IDLE (done 8/9) while a detached local run,
started with `r` and still writing, had answers in flight: the header read only the runs of
this process. A live run writing a watched dataset now makes it RUNNING, with its pid and
its requests in flight of its limit (its progress.json's pool).

The real app over a real config file, a real detached `gen-tui run` against the simulator
(slow enough to stay up), the panel's local link watching the config's output folder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import orjson

from gen_tui.app.cli.launch import config_source, run_command
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.sim import SimServer
from gen_tui.widgets.header import RunHeader, header_parts
from tests.support.polling import wait_until
from tests.support.tui import SIZE


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
    folder = prompts_dir(A=400)
    out = tmp_path / "out"
    path = tmp_path / "gen-tui.toml"
    path.write_text(
        f'[run]\nserver_urls = ["{server.url}"]\ntokenizer = "{tokenizer_dir}"\n'
        f'output_dir = "{out}"\nmax_tokens_per_dataset = "10M"\n\n'
        "[sampling]\nmax_new_tokens = 64\n\n"
        f'[[datasets]]\nname = "A"\nprompts = "{folder / "A.jsonl"}"\n'
    )
    source = config_source(path)
    local = host_source(
        None, str(source.config.output_dir), datasets=["A"], discover=False,
        command=run_command(path),
    )  # fmt: skip
    app = GenTuiApp(source, autostart=False, hosts=[local])
    link = app.links[0]
    run: subprocess.Popen[bytes] | None = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            header = app.query_one("#header", RunHeader)
            await pilot.pause(1.0)
            assert header.view.state == "idle", header.view
            run = subprocess.Popen(run_command(path), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
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
            pool = orjson.loads((out / "A" / "progress.json").read_bytes())["pool"]
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
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        if run is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
            run.wait()
