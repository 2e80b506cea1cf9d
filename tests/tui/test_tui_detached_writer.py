"""`r` in config mode on a dataset a detached run still writes (issue 31): the run `s`
started as its own `gen-tui run --config FILE` process, which outlives the panel. Where the
panel's link to the output folder could not start A detached at that moment (connecting,
its stream stale, the folder not there yet), `r` started a new run in this process, which
then failed on the dataset's lock; it now sees the live writer and refuses in one line, as
it does for a run on a host (`k` first).

The real app over a real config file, a real detached `gen-tui run` against the simulator
(slow enough to stay up), the panel's local link watching the config's output folder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widgets import Input

from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.dialogs.modals import ResumeScreen
from gen_tui.backends.sim import SimServer
from tests.support.polling import wait_until
from tests.support.tui import SIZE, Notes, panel
from tests.support.watched_run import watched_run


async def test_r_on_a_dataset_a_detached_run_writes_refuses_in_one_line(
    tmp_path: Path,
    sim: Callable[..., object],
    prompts_dir: Callable[..., Path],
    tokenizer_dir: Path,
) -> None:
    """The panel opens before the output folder exists: its link cannot start runs there
    yet, so `r` would run A in this process and asks a budget. Meanwhile the run `s`
    started (from another panel, since quit) makes the folder and writes A. Enter: one line
    naming its pid, and nothing starts here (it used to start, then fail on A's lock)."""
    # Slow enough that the detached run outlives the test: 4 slots at 20 tok/s, answers of
    # up to 64 tokens, 400 prompts (minutes; it once ended in 4 s on a faster simulator).
    server = await sim(tokens_per_s=20, slots=4)  # type: ignore[misc]
    assert isinstance(server, SimServer)
    notes = Notes()
    with watched_run(tmp_path, server.url, tokenizer_dir, prompts_dir(A=400)) as watched:
        app, link = watched.app, watched.link
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            await wait_until(lambda: "does not exist" in link.state, 30, pause=pilot.pause,
                             detail=lambda: link.state)  # fmt: skip
            await wait_until(lambda: app.query(f"#{panel_id('A')}"), pause=pilot.pause)
            panel(app, "A").focus()
            await pilot.press("r")
            modal = await wait_until(
                lambda: isinstance(app.screen, ResumeScreen) and app.screen, 5, pause=pilot.pause
            )
            where = str(modal.query_one("#resume-where").render())
            assert "in this process" in where, where

            # What `s` started in an earlier panel: `gen-tui run --config FILE`, detached.
            run = watched.start()
            monitor = lambda: link.monitor  # noqa: E731
            await wait_until(
                lambda: monitor() is not None and monitor().writer("A") is not None,
                60,
                "the link sees the detached run write A",
                pause=pilot.pause,
                detail=lambda: link.state,
            )
            modal.query_one("#budget", Input).insert_text_at_cursor("5M")
            await pilot.press("enter")
            await wait_until(lambda: notes.find("A", str(run.pid)), 10, pause=pilot.pause,
                             detail=lambda: notes.items)  # fmt: skip
            (note,) = notes.find("A", str(run.pid))
            assert note[1].startswith(f"pid {run.pid} still writes it: press k first"), note
            await pilot.pause(1.0)
            assert not app.runs, "nothing started in this process"
            assert not link.started, "nothing started beside it"
            assert not notes.find("lock"), notes.items
            assert run.poll() is None, "the detached run goes on"

            await pilot.press("r")  # and at once, now that the writer is seen
            await wait_until(lambda: len(notes.find("A", str(run.pid))) == 2, 10,
                             pause=pilot.pause)  # fmt: skip
            assert not isinstance(app.screen, ResumeScreen), "no budget asked"
            await pilot.press("s")  # nor does s start one here beside it
            await pilot.pause(0.5)
            assert not app.runs and not link.started
