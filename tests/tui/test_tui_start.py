"""`s`: it asks first, saying what starts, where and with which budgets; it keeps the
budgets set with `r`; from a config file it starts a detached `gen-tui run` that outlives
the panel (issue 31, defect 5 and request 5)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Input

from gen_tui.app.cli.launch import _finish, config_source, run_command
from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.sim import SimServer
from tests.support.polling import wait_until
from tests.support.runs import alive
from tests.support.tui import SIZE, panel, snap


def _text(screen: ConfirmScreen) -> str:
    return " ".join(str(widget.render()) for widget in screen.query("Static"))


async def test_s_after_everything_finished_asks_and_keeps_the_budgets_set_with_r(
    app_factory: Callable[..., GenTuiApp],
) -> None:
    app = app_factory(datasets={"A": (60, 2_000), "B": (60, 2_000)}, mean=200)
    async with app.run_test(size=SIZE) as pilot:

        def ended() -> bool:
            return bool(app.runs) and not app.runs[-1].active

        await wait_until(ended, 60, "the run ended", pause=pilot.pause)
        await pilot.press("s")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        assert isinstance(app.screen, ConfirmScreen)
        assert "finished" in _text(app.screen), "it says everything has finished"
        await pilot.press("n")
        await pilot.pause(0.3)
        assert len(app.runs) == 1, "nothing restarted without a yes"

        panel(app, "A").focus()
        await pilot.press("r")
        modal = await wait_until(
            lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
        )
        modal.query_one("#budget").insert_text_at_cursor("4000")  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_until(lambda: len(app.runs) == 2, 10, pause=pilot.pause)
        await wait_until(ended, 60, "A's resume ended", pause=pilot.pause)

        await pilot.press("s")
        await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        assert isinstance(app.screen, ConfirmScreen)
        assert "4k tokens (set with r)" in _text(app.screen), _text(app.screen)
        await pilot.press("y")
        await wait_until(lambda: len(app.runs) == 3, 10, pause=pilot.pause)
        await wait_until(
            lambda: (a := app.runs[2].dataset("A")) is not None and a.max_tokens == 4000,
            30,
            "the new run keeps A's budget set with r",
            pause=pilot.pause,
        )
        assert (b := app.runs[2].dataset("B")) is not None and b.max_tokens == 2_000
        app.runs[2].abort()
        await wait_until(ended, 60, pause=pilot.pause)


async def test_s_from_a_config_starts_a_detached_run_that_outlives_the_panel(
    tmp_path: Path,
    sim: Callable[..., object],
    prompts_dir: Callable[..., Path],
    tokenizer_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = await sim(tokens_per_s=2000)  # type: ignore[misc]
    assert isinstance(server, SimServer)
    folder = prompts_dir(A=400, B=400)
    path = tmp_path / "gen-tui.toml"
    path.write_text(
        f'[run]\nserver_urls = ["{server.url}"]\ntokenizer = "{tokenizer_dir}"\n'
        f'output_dir = "{tmp_path / "out"}"\nmax_tokens_per_dataset = "10M"\n\n'
        "[sampling]\nmax_new_tokens = 256\n\n"
        f'[[datasets]]\nname = "A"\nprompts = "{folder / "A.jsonl"}"\n\n'
        f'[[datasets]]\nname = "B"\nprompts = "{folder / "B.jsonl"}"\n'
    )
    (tmp_path / "out").mkdir()  # watched (and `s` detached) once the folder is there
    source = config_source(path)
    local = host_source(
        None,
        str(source.config.output_dir),
        datasets=["A", "B"],
        discover=False,
        command=run_command(path),
    )
    app = GenTuiApp(source, autostart=False, hosts=[local])
    link = app.links[0]
    pid = 0
    pids: list[int] = []
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(
                lambda: link.state == "connected", 30, pause=pilot.pause, detail=lambda: link.state
            )
            await wait_until(lambda: app.query(f"#{panel_id('A')}"), pause=pilot.pause)
            await wait_until(lambda: snap(app, "A") is not None, 30, pause=pilot.pause)
            panel(app, "A").focus()
            await pilot.pause()
            await pilot.press("r")  # A alone to 3k, detached too: its budget is kept for s
            await wait_until(lambda: isinstance(app.screen, ResumeScreen), pause=pilot.pause)
            app.screen.query_one("#budget", Input).insert_text_at_cursor("3000")
            await pilot.press("enter")
            await wait_until(lambda: link.started, 30, "A started", pause=pilot.pause)
            first = link.started[0]
            pids.append(first.pid)
            assert first.cmdline[-4:] == ("--datasets", "A", "--max-tokens-per-dataset", "3000")
            await wait_until(lambda: not alive(first.pid), 60, "A's run ended", pause=pilot.pause)
            await wait_until(
                lambda: link.monitor is not None and link.monitor.writer("A") is None,
                30,
                pause=pilot.pause,
            )

            await pilot.press("s")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
            assert isinstance(app.screen, ConfirmScreen)
            said = _text(app.screen)
            assert "detached" in said and "gen_tui.app.cli run --config" in said, said
            assert "--datasets A --max-tokens-per-dataset 3000" in said, "r's budget is kept"
            await pilot.press("y")
            await wait_until(lambda: len(link.started) == 3, 30, "both started", pause=pilot.pause)
            pids.extend(identity.pid for identity in link.started[1:])
            pid = link.started[2].pid
            assert link.started[2].cmdline[-2:] == ("--datasets", "B"), "B: the config's budget"
            assert "--config" in link.started[2].cmdline
            assert not app.runs, "nothing runs in this process"
            await wait_until(
                lambda: (b := snap(app, "B")) is not None and b.samples > 0,
                60,
                "its records show on the panel",
                pause=pilot.pause,
            )
            await pilot.press("q")
            await wait_until(lambda: not app.is_running, 10, pause=pilot.pause)
        capsys.readouterr()
        _finish(app, 0)
        assert alive(pid), "quitting the panel does not stop a detached run"
        said = capsys.readouterr().err.strip()
        assert said.startswith("gen-tui: 2 datasets, "), said
        assert f"tokens written to {tmp_path / 'out'}/ this session" in said, said
        assert said.endswith(f"; run {pid} still running on local"), said
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        for started in pids:
            if alive(started):
                os.killpg(started, signal.SIGKILL)
