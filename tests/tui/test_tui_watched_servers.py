"""Issue 31, the header's last residual: for a run this panel hosts the header says "in
flight N/LIMIT (server: R run, Q queued, T in transit)"; for a WATCHED run (a `gen-tui run`
of another process, seen through a host link, its progress.json read) it said "in flight
N/LIMIT" alone, though the panel polls the same servers' /metrics for the strip under it.
The header now says the watched servers' figures the same way, from what the strip shows.

The real app over a real config file, a real detached `gen-tui run` against a real
`gen-tui sim` process (4 slots, slow: the run's 8 requests keep 4 running and 4 queued),
watched through the panel's local link, at 120 and at 80 columns.
"""

from __future__ import annotations

from pathlib import Path

from gen_tui.widgets.header import RunHeader
from gen_tui.widgets.server_strip import ServerStrip
from tests.support.polling import wait_until
from tests.support.sim_cli import sim_process
from tests.support.watched_run import watched_run

SLOTS = 4
CONCURRENCY = 8


async def test_a_watched_runs_header_says_its_servers_run_and_queued(
    tmp_path: Path, prompts_dir: object, tokenizer_dir: Path, vocab_size: int
) -> None:
    folder = prompts_dir(A=400)  # type: ignore[operator]
    sim_args = ("--slots", str(SLOTS), "--tokens-per-s", "8", "--vocab-size", str(vocab_size))
    sim_args += ("--default-mean", "60", "--default-cv", "0")  # ~7 s a request
    async with sim_process(*sim_args) as url:
        concurrency = f"concurrency = {CONCURRENCY}\n"
        with watched_run(tmp_path, url, tokenizer_dir, folder, concurrency) as watched:
            app, link = watched.app, watched.link
            async with app.run_test(size=(120, 36)) as pilot:
                header = app.query_one("#header", RunHeader)
                strip = app.query_one(ServerStrip)
                run = watched.start()

                def settled() -> bool:
                    view = header.view
                    return (
                        view.state == "running"
                        and view.inflight == CONCURRENCY
                        and view.server_running == SLOTS
                        and view.server_queued == CONCURRENCY - SLOTS
                        # the folder the run creates, seen by a survey since (2 s)
                        and all(state == "connected" for _, state in view.hosts)
                    )

                # Its 8 requests: the simulator's 4 slots run 4, it queues the other 4.
                # On main the header's server figures stayed None for a watched run.
                await wait_until(
                    settled, 90, "the header says the watched server's 4 run, 4 queued",
                    pause=pilot.pause, detail=lambda: (link.state, header.view, strip.view),
                )  # fmt: skip
                view = header.view
                assert view.concurrency == CONCURRENCY, view
                # The same figures as the server strip under it shows for that server.
                (line,) = [line for line in strip.view if line.url.rstrip("/") == url]
                assert line.metrics is not None, strip.view
                assert (line.metrics.running, line.metrics.queued) == (SLOTS, 4), line
                drawn = str(header.render())
                assert f"in flight {CONCURRENCY}/{CONCURRENCY}" in drawn, drawn
                assert f"(server: {SLOTS} run, 4 queued)" in drawn, drawn
                assert len(drawn) <= 120, drawn

                # 80 columns: the ranked shortening holds, the pid gives way first, then
                # the servers' words shorten; the in-flight count always stays.
                await pilot.resize_terminal(80, 24)
                await wait_until(
                    lambda: header.size.width == 80, 10, "the header at 80 columns",
                    pause=pilot.pause,
                )  # fmt: skip
                await wait_until(settled, 30, "still settled", pause=pilot.pause)
                drawn = str(header.render())
                assert len(drawn) <= 80, drawn
                assert f"in flight {CONCURRENCY}/{CONCURRENCY}" in drawn, drawn
                assert f"pid {run.pid}" not in drawn, drawn
                assert f"(srv {SLOTS} run · 4 q)" in drawn, drawn
