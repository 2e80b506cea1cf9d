"""`R`: after killing a run of several datasets on a host, every one of them starts again in
one new run, as launched, budgets included (`r` resumes the selected one only; issue 31,
request 4)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.sim import SimServer
from tests.support.polling import wait_until
from tests.support.runs import alive, run_args, spawn
from tests.support.tui import SIZE, Notes, panel, snap


def _text(screen: ConfirmScreen) -> str:
    return " ".join(str(widget.render()) for widget in screen.query("Static"))


async def test_R_after_a_kill_resumes_every_dataset_of_the_run_in_one_new_run(
    tmp_path: Path,
    sim: Callable[..., object],
    prompts_dir: Callable[..., Path],
    tokenizer_dir: Path,
) -> None:
    prompts = prompts_dir(A=400, B=400)
    args, first, app = await _watched_run(
        sim, tmp_path, tokenizer_dir, prompts, "--max-tokens-per-dataset", "10M"
    )
    link = app.links[0]
    pids = [first.pid]
    try:
        notes = Notes()
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            await wait_until(
                lambda: _written(app, "A") and _written(app, "B"), 60, pause=pilot.pause
            )
            panel(app, "B").focus()
            await pilot.press("R")
            await pilot.pause(0.2)
            assert not isinstance(app.screen, ConfirmScreen), "R refuses while the run writes"
            await pilot.press("P")  # one dataset of another process: no channel, said so
            await wait_until(lambda: notes.find("k stops its whole process"), pause=pilot.pause)
            await _kill(pilot, app, first, "B")
            await pilot.press("R")
            modal = await wait_until(
                lambda: isinstance(app.screen, ConfirmScreen) and app.screen, pause=pilot.pause
            )
            said = _text(modal)
            assert "Datasets: A, B" in said and "--max-tokens-per-dataset 10M" in said, said
            await pilot.press("y")
            await wait_until(lambda: link.started, 30, "the new run", pause=pilot.pause)
            started = link.started[0]
            pids.append(started.pid)
            assert started.cmdline == tuple(first_cmdline(args))
            monitor = link.monitor
            assert monitor is not None

            def by_new_run(name: str) -> bool:
                writer = monitor.writer(name)
                return writer is not None and writer.pid == started.pid

            await wait_until(
                lambda: by_new_run("A") and by_new_run("B"),
                60,
                "both written by the new run",
                pause=pilot.pause,
            )
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        for pid in pids:
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)


async def _watched_run(
    sim: Callable[..., object],
    tmp_path: Path,
    tokenizer_dir: Path,
    prompts: Path,
    *flags: str,
) -> tuple[list[str], asyncio.subprocess.Process, GenTuiApp]:
    """A detached run of `prompts` over a simulator, and a panel watching its folder on the
    local host: (its arguments, its process, the app)."""
    server = await sim(tokens_per_s=2000)  # type: ignore[misc]
    assert isinstance(server, SimServer)
    out = tmp_path / "out"
    out.mkdir()
    args = run_args(tokenizer_dir, prompts, out, server.url, *flags)
    first = await spawn(*args)
    return args, first, GenTuiApp(None, hosts=[host_source("local", str(out), grace_s=5)])


def _written(app: GenTuiApp, name: str) -> bool:
    """`name`'s panel shows and its run has written a sample."""
    if not app.query(f"#{panel_id(name)}"):
        return False
    seen = snap(app, name)
    return seen is not None and seen.samples > 0


async def _kill(
    pilot: Pilot[int], app: GenTuiApp, run: asyncio.subprocess.Process, name: str
) -> None:
    """`k`, `y` on the selected `name`: its run killed, and gone."""
    await pilot.press("k")
    await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
    await pilot.press("y")
    link = app.links[0]
    await wait_until(lambda: link.outcome.get(name), 30, "the kill", pause=pilot.pause)
    await run.wait()


def first_cmdline(args: list[str]) -> list[str]:
    """The first run's command line as the host sees it: `python -m gen_tui.app.cli ARGS`."""
    from tests.support.runs import GEN_TUI

    return [*GEN_TUI, *args]


async def test_after_a_kill_K_says_the_run_ended_and_R_names_its_one_dataset(
    tmp_path: Path,
    sim: Callable[..., object],
    prompts_dir: Callable[..., Path],
    tokenizer_dir: Path,
) -> None:
    """Tried in the demo (issue 31): `K` on B9 once killed spoke of its process as though it
    still ran, and `R` on a run of one dataset asked "Resume all 1?"."""
    _args, first, app = await _watched_run(sim, tmp_path, tokenizer_dir, prompts_dir(A=400))
    link = app.links[0]
    try:
        notes = Notes()
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            await wait_until(lambda: _written(app, "A"), 60, pause=pilot.pause)
            panel(app, "A").focus()
            await _kill(pilot, app, first, "A")
            await pilot.press("K")
            said = await wait_until(lambda: notes.find("nothing to stop"), pause=pilot.pause)
            assert "its run has ended" in str(said), said
            assert not notes.find("k stops its whole process")
            await pilot.press("P")
            await wait_until(lambda: notes.find("nothing to pause"), pause=pilot.pause)
            await pilot.press("R")
            modal = await wait_until(
                lambda: isinstance(app.screen, ConfirmScreen) and app.screen, pause=pilot.pause
            )
            assert isinstance(modal, ConfirmScreen)
            assert modal.title_text == "Resume A?", modal.title_text
            await pilot.press("n")
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        if alive(first.pid):
            os.killpg(first.pid, signal.SIGKILL)
