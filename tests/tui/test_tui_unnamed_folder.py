"""A run whose command line names no output folder (a script's own flags, a `--config`) was
taken for a run of the watched folder: watching `/tmp/h31hd/out`, panels `B1` and `D0`
("not started", `local:0`) appeared beside ours, from another project's `run_inference.py
--datasets D0` writing its own folder (issue 31, point 1, seen again as a new user). Its
folder is now the one it holds record files open in: it shapes no panel here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.store.records import RAW_FILE
from gen_tui.widgets.dataset_panel import DatasetPanel
from tests.support.polling import wait_until
from tests.support.tui import SIZE

# Another project's script: `--datasets NAME`, its folder its own business (here the cwd's
# `results/`), the record file held open for writing as it works.
SCRIPT = """
import os, sys, time
name = sys.argv[sys.argv.index("--datasets") + 1]
os.makedirs(os.path.join("results", name), exist_ok=True)
with open(os.path.join("results", name, "RAW"), "a") as records:
    print("ready", flush=True)
    time.sleep(120)
""".replace("RAW", RAW_FILE)


async def test_a_script_naming_no_folder_and_writing_its_own_shapes_no_panel_here(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    (out / "A" / RAW_FILE).write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = elsewhere / "run_inference.py"
    script.write_text(SCRIPT)
    theirs = subprocess.Popen(
        [sys.executable, str(script), "--datasets", "Z9"],
        cwd=elsewhere, stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert theirs.stdout is not None and theirs.stdout.readline() == b"ready\n"
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    link = app.links[0]
    try:
        async with app.run_test(size=SIZE) as pilot:

            def seen() -> bool:
                monitor = link.monitor
                return monitor is not None and any(r.pid == theirs.pid for r in monitor.runs)

            await wait_until(seen, 30, "the survey lists their script", pause=pilot.pause)
            await pilot.pause(2.5)  # a survey more, with it listed
            monitor = link.monitor
            assert monitor is not None
            (run,) = [r for r in monitor.runs if r.pid == theirs.pid]
            # Where it writes, not the watched folder; it writes Z9 there.
            assert run.output_dir == str(elsewhere / "results"), run
            assert run.writing == ("Z9",), run
            assert "Z9" not in monitor.datasets, monitor.datasets
            shown = [p.dataset for p in app.query(DatasetPanel)]
            assert shown == ["A"], shown
            assert monitor.writer("Z9") is None
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        theirs.kill()
        theirs.wait()
