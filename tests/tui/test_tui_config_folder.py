"""A `gen-tui run --config FILE` that has written nothing yet was counted as a run of the
watched folder: `l` showed another project's just-started run as `3951 running 0s -` under
"2 live", `k` offered on it, until it wrote elsewhere (issue 31, point 1). Its folder is now
its config's `[run] output_dir` (relative to the config's folder, as the run reads it);
when the config cannot be read its folder is unknown, and it is counted in no watched one.

Both runs are real `gen-tui run` processes of another folder, stopped (SIGSTOP) as soon as
they start, so that they never write anything while the panel looks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from gen_tui.app.dialogs.run_list import run_key
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.store.records import RAW_FILE
from tests.support.polling import wait_until
from tests.support.run_list import first_link, kill_confirmation, open_run_list, run_of
from tests.support.runs import ENV, GEN_TUI
from tests.support.tui import SIZE


def started_and_stopped(config: str, cwd: Path) -> subprocess.Popen[bytes]:
    """`gen-tui run --config CONFIG` in `cwd`, stopped before it reads or writes anything
    (Popen returns once it has exec'd: its command line and cwd are in /proc)."""
    run = subprocess.Popen(
        [*GEN_TUI, "run", "--config", config, "--plain"],
        cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    os.kill(run.pid, signal.SIGSTOP)
    return run


async def test_a_config_run_that_wrote_nothing_is_not_counted_in_the_watched_folder(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    (out / "A" / RAW_FILE).write_text("")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "conf").mkdir(parents=True)
    (elsewhere / "conf" / "gen-tui.toml").write_text(
        '[run]\noutput_dir = "../results"  # beside conf/\n[[datasets]]\nname = "B2"\n'
    )
    (elsewhere / "broken.toml").write_text('[run\noutput_dir = "x"\n')
    theirs = started_and_stopped("conf/gen-tui.toml", elsewhere)
    broken = started_and_stopped("broken.toml", elsewhere)
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    try:
        with first_link(app) as link:
            async with app.run_test(size=SIZE) as pilot:
                await wait_until(
                    lambda: run_of(link, theirs.pid) and run_of(link, broken.pid),
                    30,
                    "the survey lists both runs",
                    pause=pilot.pause,
                )
                run = run_of(link, theirs.pid)
                assert run is not None
                assert run.output_dir == os.path.realpath(elsewhere / "results"), run
                unknown = run_of(link, broken.pid)
                assert unknown is not None
                assert unknown.output_dir is None, unknown
                why = "config broken.toml cannot be read as TOML"
                assert unknown.folder_unknown == why, unknown
                assert not (elsewhere / "results").exists(), "the stopped run wrote"

                runs = await open_run_list(app, pilot)
                await wait_until(lambda: "hidden" in runs.title(), pause=pilot.pause)
                # Neither is live here (on main: "2 live"); other runs of the box may be
                # hidden too.
                assert runs.title().startswith(" Runs: 0 live, 0 ended · "), runs.title()
                assert "in other folders hidden (o shows them)" in runs.title(), runs.title()
                assert not runs.shown(), runs.shown()

                await pilot.press("o")
                their_key, unknown_key = run_key(run), run_key(unknown)
                await wait_until(
                    lambda: {their_key, unknown_key} <= runs.shown(), pause=pilot.pause
                )
                assert runs.cell(unknown_key) == "local · folder unknown"
                body = await kill_confirmation(app, pilot, runs, unknown_key)
                assert f"Writes unknown ({why}): another folder" in body, body
                await pilot.press("n")
    finally:
        for process in (theirs, broken):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
