"""Runs writing other folders of the same box (issue 31, points 1 and 2): they never shape the
watched folder's panels (budgets, `r`'s flags), `l` lists them only behind a toggle, marked
with their folder, and `k` on one names that folder.

One real `gen-tui run` of another project, writing `elsewhere/out` with budgets of its own
(`--max-samples 100000`, `--max-tokens-per-dataset 12M`), stays up for the whole module.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gen_tui.app.cli.launch import config_source
from gen_tui.app.dialogs.modals import ResumeScreen
from gen_tui.app.dialogs.run_list import run_key
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetState
from tests.support.other_folder import OtherRun, other_folder_run
from tests.support.polling import wait_until
from tests.support.run_list import kill_confirmation, open_run_list, opened, run_of
from tests.support.runs import standin_argv
from tests.support.tui import SIZE, panel, snap


@pytest.fixture(scope="module")
def other_run(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path, vocab_size: int
) -> Iterator[OtherRun]:
    root = tmp_path_factory.mktemp("elsewhere")
    flags = ("--max-samples", "100000", "--max-tokens-per-dataset", "12M")
    with other_folder_run(root, tokenizer_dir, vocab_size, ("B1_glaive", "B2"), *flags) as run:
        yield run


def _ours_watched(out: Path, standin: Path) -> tuple[subprocess.Popen[bytes], GenTuiApp]:
    """Our own run of B2 writing `out`, and a panel watching `out` on this box."""
    out.mkdir()
    ours = subprocess.Popen(
        standin_argv(standin, str(out), "B2"), stdout=subprocess.DEVNULL, start_new_session=True
    )
    return ours, GenTuiApp(None, hosts=[host_source("local", str(out))])


async def test_another_folders_run_lends_no_budget_and_no_resume_flag(
    other_run: OtherRun, tmp_path: Path, standin: Path
) -> None:
    """Our B2, left by our own run, is watched while another project's B2 runs elsewhere
    with --max-samples 100000: our panel shows no sample budget and `r` adds no flag."""
    ours, app = _ours_watched(tmp_path / "out", standin)
    link = app.links[0]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(lambda: run_of(link, ours.pid), 30, pause=pilot.pause)
            await wait_until(lambda: run_of(link, other_run.pid), 30, pause=pilot.pause)
            os.kill(ours.pid, signal.SIGTERM)  # our run ends: only the other one is left
            ours.wait(timeout=30)
            await wait_until(lambda: not run_of(link, ours.pid), 30, pause=pilot.pause)
            await wait_until(lambda: snap(app, "B2") is not None, 30, pause=pilot.pause)
            await wait_until(
                lambda: snap(app, "B2").state is DatasetState.STOPPED, 30, pause=pilot.pause
            )
            await pilot.pause(2.5)  # a survey more, with the other run listed and ours gone
            b2 = snap(app, "B2")
            assert (b2.max_tokens, b2.max_samples) == (None, None), "another folder's budget"

            panel(app, "B2").focus()
            modal = await opened(app, pilot, "r", ResumeScreen)
            assert modal.target.max_samples is None
            command = str(modal.query_one("#resume-command").render())
            assert str(standin) in command, command  # our own run's command, relaunched
            assert "--max-samples" not in command and "100000" not in command, command
            await pilot.press("escape")
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        if ours.poll() is None:
            ours.kill()
            ours.wait()


async def test_a_fresh_configs_budget_is_not_taken_from_another_folders_run(
    other_run: OtherRun, tmp_path: Path
) -> None:
    """A config whose B1_glaive has never run here opens at its own 300k, not at the 12M of
    a B1_glaive that another project runs in another folder."""
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "B1_glaive.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    path = tmp_path / "gen-tui.toml"
    path.write_text(
        '[run]\nserver_urls = ["http://127.0.0.1:9"]\ntokenizer = "tok"\noutput_dir = "out"\n'
        'max_tokens_per_dataset = "300k"\n\n'
        '[[datasets]]\nname = "B1_glaive"\nprompts = "prompts/B1_glaive.jsonl"\n'
    )
    source = config_source(path)
    local = host_source(None, str(source.config.output_dir), datasets=["B1_glaive"], discover=False)
    app = GenTuiApp(source, autostart=False, hosts=[local])
    link = app.links[0]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(lambda: run_of(link, other_run.pid), 30, pause=pilot.pause)
            await wait_until(lambda: snap(app, "B1_glaive") is not None, 30, pause=pilot.pause)
            await pilot.pause(2.5)  # a survey more
            b1 = snap(app, "B1_glaive")
            assert b1.state is DatasetState.NOT_STARTED
            assert (b1.max_tokens, b1.max_samples) == (300_000, None)
    finally:
        app.stop_links()
        link.done.wait(timeout=30)


async def test_l_lists_the_watched_folders_runs_and_others_behind_o_naming_their_folder(
    other_run: OtherRun, tmp_path: Path, standin: Path
) -> None:
    """`l` lists our run and not the other project's; `o` shows it, marked "other folder"
    with its folder, and `k` on it names that folder before anything is stopped."""
    ours, app = _ours_watched(tmp_path / "out", standin)
    link = app.links[0]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(
                lambda: run_of(link, ours.pid) and run_of(link, other_run.pid),
                30,
                pause=pilot.pause,
            )
            other = run_of(link, other_run.pid)
            assert other.output_dir == str(other_run.out)
            our_key, their_key = run_key(run_of(link, ours.pid)), run_key(other)
            runs = await open_run_list(app, pilot)
            shown, table, screen = runs.shown, runs.table, runs.screen
            await wait_until(lambda: our_key in shown(), pause=pilot.pause)
            assert their_key not in shown(), "another folder's run listed by default"
            assert "in other folders hidden (o shows them)" in runs.title(), runs.title()
            assert runs.cell(our_key) == "local"

            await pilot.press("o")
            await wait_until(lambda: their_key in shown(), pause=pilot.pause)
            cell = runs.cell(their_key)
            assert cell == f"local · other folder …{str(other_run.out)[-39:]}", cell
            assert runs.cell(our_key) == "local"
            body = await kill_confirmation(app, pilot, runs, their_key)
            assert f"Writes {other_run.out}: another folder, not the one watched here" in body
            await pilot.press("n")
            await wait_until(lambda: app.screen is screen, pause=pilot.pause)
            assert other_run.process.poll() is None

            # A run of a third folder's B2 that ended: `r` on it previews its own figures,
            # none of our B2's, and says where it writes.
            third = tmp_path / "third" / "out"
            third.mkdir(parents=True)
            gone = subprocess.Popen(
                standin_argv(standin, str(third), "B2"),
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
            await wait_until(lambda: run_of(link, gone.pid), 30, pause=pilot.pause)
            gone_key = run_key(run_of(link, gone.pid))
            await wait_until(lambda: snap(app, "B2") and snap(app, "B2").tokens, pause=pilot.pause)
            gone.kill()
            gone.wait()
            await wait_until(
                lambda: gone_key in shown() and runs.cell(gone_key, 2) == "ended",
                30,
                pause=pilot.pause,
            )
            table.move_cursor(row=table.get_row_index(gone_key))
            modal = await opened(app, pilot, "r", ResumeScreen)
            assert (modal.target.tokens, modal.target.max_tokens) == (0, None)
            assert f"(it writes {third}, another folder)" in modal.target.where
            await pilot.press("escape")
            await wait_until(lambda: app.screen is screen, pause=pilot.pause)

            await pilot.press("o")
            await wait_until(lambda: their_key not in shown(), pause=pilot.pause)
            assert our_key in shown()
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        ours.kill()
        ours.wait()
