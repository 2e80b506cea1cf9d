"""The control panel on a host reached over a real OpenSSH sshd: a stale B2 run is seen, killed
with `k`, resumed with `r` to a new budget, and crosses it live; the run list shows it all.

The "remote" is this machine through loopback sshd, so the test can recount the files and
check the processes; everything the app does goes through SSH.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.widgets import Input

from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.dialogs.modals import ConfirmScreen, ResumeScreen, StartScreen
from gen_tui.app.dialogs.run_list import RunsScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.hosts import RunIdentity, SSHHost
from gen_tui.backends.sim import LengthProfile
from gen_tui.backends.store.records import RAW_FILE, scan_records
from gen_tui.widgets.run_table import RunTable
from tests.support.polling import wait_until
from tests.support.records import recount
from tests.support.runs import alive, append_records
from tests.support.sim_http import reconfigure
from tests.support.sshd import Sshd
from tests.support.tui import SIZE, Notes, badge, panel, snap


async def test_stale_run_over_ssh_is_killed_resumed_and_crosses_its_budget_live(
    sshd: Sshd, sim: Any, tokenizer_dir: Path, prompts_dir: Callable[..., Path], tmp_path: Path
) -> None:
    # One slow slot: a record every ~1.5 s, so with a 1 s threshold the run goes stale
    # between records. No token budget: the seeds' forgotten run.
    server = await sim(tokens_per_s=100, slots=1, profiles={"B2": LengthProfile(mean=150)})
    out = tmp_path / "remote-out"
    out.mkdir()
    argv = [
        *(sys.executable, "-m", "gen_tui.app.cli", "run"),
        *("--prompts-dir", str(prompts_dir(B2=3000)), "--tokenizer", str(tokenizer_dir)),
        *("--output-dir", str(out), "--server-url", server.url),
        *("--plain", "--concurrency", "1", "--max-new-tokens", "512", "--datasets", "B2"),
    ]
    starter = SSHHost("starter", sshd.alias, str(out), options=sshd.options())
    await starter.connect()
    first = await starter.start(argv, str(tmp_path / "first.log"))
    await starter.close()
    pids = [first.pid]

    source = host_source(sshd.alias, str(out), options=sshd.options(), grace_s=20.0)
    app = GenTuiApp(None, hosts=[source], stale_after_s=1.0)
    link = app.links[0]
    notes = Notes()
    try:
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            # B2's panel appears once the host has been surveyed: nothing named it before.
            await wait_until(lambda: app.query(f"#{panel_id('B2')}"), 60, pause=pilot.pause)
            await wait_until(
                lambda: snap(app, "B2") and snap(app, "B2").samples >= 1, 60, pause=pilot.pause
            )
            assert snap(app, "B2").pid == first.pid and snap(app, "B2").host == sshd.alias
            assert snap(app, "B2").max_tokens is None
            header = app.dashboard.query_one("#header").view
            # a watched run that writes: RUNNING, its pid and host (issue 31, point 7)
            assert header.state == "running" and header.hosts == ((sshd.alias, "connected"),)
            assert header.where == f"pid {first.pid} on {sshd.alias}", header
            await wait_until(lambda: badge(app, "B2") == "stale · press k", 30, pause=pilot.pause)

            # k: the confirmation names the host, the pid and the dataset.
            await pilot.press("k")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
            body = str(app.screen.query_one("#confirm-body").render())
            assert f"pid {first.pid} on {sshd.alias}" in body and "B2" in body
            await pilot.press("y")
            await wait_until(lambda: link.outcome.get("B2") == "stopped", 60, pause=pilot.pause)
            assert not alive(first.pid)
            tokens, records = recount(out / "B2")
            assert records == server.stats.completed, "a completed response was not written"
            await wait_until(
                lambda: (snap(app, "B2").tokens, snap(app, "B2").samples) == (tokens, records),
                pause=pilot.pause,
            )
            await wait_until(lambda: badge(app, "B2") == "stopped", 10, pause=pilot.pause)

            # r: a new budget; the run starts again over SSH and crosses it live.
            await reconfigure(server, {"tokens_per_s": 20_000})
            budget = tokens + 2000
            await pilot.press("r")
            modal = await wait_until(
                lambda: isinstance(app.screen, ResumeScreen) and app.screen, pause=pilot.pause
            )
            where = str(modal.query_one("#resume-where").render())
            assert sshd.alias in where
            modal.query_one("#budget", Input).insert_text_at_cursor("12x")
            await pilot.press("enter")
            assert isinstance(app.screen, ResumeScreen), "a bad budget was accepted"
            modal.query_one("#budget", Input).clear()
            modal.query_one("#budget", Input).insert_text_at_cursor(str(budget))
            await pilot.press("enter")
            await wait_until(lambda: len(link.started) == 1, 60, pause=pilot.pause)
            second: RunIdentity = link.started[0]
            pids.append(second.pid)
            assert second.cmdline == (*first.cmdline, "--max-tokens-per-dataset", str(budget))
            await wait_until(
                lambda: any("B2" in t and "crossed its" in t for _, t in app.events),
                90,
                pause=pilot.pause,
            )
            await wait_until(lambda: badge(app, "B2") == "budget reached", 60, pause=pilot.pause)
            await wait_until(lambda: not alive(second.pid), 30, pause=pilot.pause)
            final = recount(out / "B2")
            assert final[0] >= budget
            await wait_until(
                lambda: (snap(app, "B2").tokens, snap(app, "B2").samples) == final,
                20,
                pause=pilot.pause,
            )
            assert snap(app, "B2").max_tokens == budget

            # l: the run list holds both runs, the first ended.
            await pilot.press("l")
            screen = await wait_until(
                lambda: isinstance(app.screen, RunsScreen) and app.screen, pause=pilot.pause
            )
            await pilot.pause(1.2)
            table = screen.query_one(RunTable)
            rows = {
                str(table.get_row_at(i)[1]): [str(cell) for cell in table.get_row_at(i)]
                for i in range(table.row_count)
            }
            assert {str(first.pid), str(second.pid)} <= set(rows)
            assert rows[str(first.pid)][2] == "ended" and rows[str(first.pid)][4] == "B2"
            await pilot.press("escape")
            assert not isinstance(app.screen, RunsScreen)
            assert panel(app, "B2").has_focus
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        for pid in pids:
            if alive(pid):
                import os
                import signal

                os.killpg(pid, signal.SIGKILL)
    assert not any(alive(pid) for pid in pids)


async def test_a_dropped_link_shows_in_the_header_and_heals_without_double_counting(
    sshd: Sshd, tmp_path: Path
) -> None:
    out = tmp_path / "remote-out"
    out.mkdir()
    await append_records(out / "A", 40, "a")
    before = {p.pid for p in sshd.sessions()}
    options = sshd.options(keepalive_interval_s=1.0, keepalive_count_max=2)
    app = GenTuiApp(None, hosts=[host_source(sshd.alias, str(out), options=options)])
    states: list[str] = []
    seen: list[int] = []

    def header() -> Any:
        return app.dashboard.query_one("#header").view

    def watch() -> bool:
        view = header()
        states.extend(state for _, state in view.hosts if not states or states[-1] != state)
        if app.query(f"#{panel_id('A')}") and (s := snap(app, "A")) is not None:
            seen.append(s.tokens)
        return False

    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: app.query(f"#{panel_id('A')}"), 60, pause=pilot.pause)
        await wait_until(
            lambda: snap(app, "A") and snap(app, "A").samples == 40, 30, pause=pilot.pause
        )
        assert header().hosts == ((sshd.alias, "connected"),)
        writer = asyncio.ensure_future(append_records(out / "A", 150, "x"))
        await pilot.pause(0.3)
        victims = [p for p in sshd.sessions() if p.pid not in before]
        assert victims, "no sshd session serves the app"
        for process in victims:
            process.kill()
        await wait_until(
            lambda: watch() or any(s != "connected" for s in states), 20, pause=pilot.pause
        )
        await writer
        scan = scan_records(out / "A" / RAW_FILE)
        expected = (scan.tokens, scan.records)
        await wait_until(
            lambda: (
                watch()
                or (
                    (snap(app, "A").tokens, snap(app, "A").samples) == expected
                    and header().hosts == ((sshd.alias, "connected"),)
                )
            ),
            60,
            pause=pilot.pause,
        )
        assert "disconnected" in " ".join(states), states
        assert seen == sorted(seen), "a total went backwards: something was counted twice"
    app.stop_links()
    app.links[0].done.wait(timeout=30)


async def test_start_a_new_dataset_from_the_run_list_with_the_hosts_template(
    tmp_path: Path, standin: Path
) -> None:
    """`l`, `s`: a dataset that never ran starts from the host's command template."""
    out = tmp_path / "out"
    out.mkdir()
    template = [sys.executable, str(standin), "--output-dir", str(out)]
    app = GenTuiApp(None, hosts=[host_source("local", str(out), command=template)])
    link = app.links[0]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(lambda: link.state == "connected", 30, pause=pilot.pause)
            await pilot.press("l")
            await wait_until(lambda: isinstance(app.screen, RunsScreen), pause=pilot.pause)
            await pilot.press("s")
            modal = await wait_until(
                lambda: isinstance(app.screen, StartScreen) and app.screen, pause=pilot.pause
            )
            assert "template" in str(modal.query_one("#start-how").render())
            modal.query_one("#dataset", Input).insert_text_at_cursor("B7;rm -rf x")
            await pilot.press("enter")
            assert isinstance(app.screen, StartScreen), "a bad dataset name was accepted"
            assert str(modal.query_one("#budget-error").render())
            modal.query_one("#dataset", Input).clear()
            modal.query_one("#dataset", Input).insert_text_at_cursor("B7")
            modal.query_one("#budget", Input).insert_text_at_cursor("5k")
            modal.query_one("#budget", Input).focus()
            await pilot.press("enter")
            await wait_until(lambda: len(link.started) == 1, 30, pause=pilot.pause)
            started = link.started[0]
            assert started.cmdline == (
                *template, "--datasets", "B7", "--max-tokens-per-dataset", "5000"
            )  # fmt: skip
            await pilot.press("escape")
            await wait_until(lambda: app.query(f"#{panel_id('B7')}"), 30, pause=pilot.pause)
            await wait_until(
                lambda: snap(app, "B7") and snap(app, "B7").samples > 0, 30, pause=pilot.pause
            )
            assert snap(app, "B7").max_tokens == 5000 and snap(app, "B7").pid == started.pid
            panel(app, "B7").focus()
            await pilot.press("k")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
            await pilot.press("y")
            await wait_until(lambda: link.outcome.get("B7") == "stopped", 30, pause=pilot.pause)
            assert not alive(started.pid)
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
