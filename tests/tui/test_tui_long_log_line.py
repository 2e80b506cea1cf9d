"""`L` on a run whose log ends in a 3 MB line (issue 30, point 10).

A progress bar redrawn with `\\r`, or a dumped answer, makes a log's last line megabytes
long. The log view read the last 64 kB, dropped them as a partial line and said "(empty so
far)", hiding every earlier line. Now the long line is shown cut, with its size, and the
lines before it stay. The real app on the local host, a real run process whose stdout is
the log.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rich.text import Text
from textual.widgets import Static

from gen_tui.app.dialogs.peek import LogScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from tests.support.polling import wait_until
from tests.support.tui import SIZE

LONG = 3_000_000


def _body(app: GenTuiApp) -> str:
    rendered = app.screen.query_one("#peek-body", Static).render()
    return rendered.plain if isinstance(rendered, Text) else str(rendered)


async def test_l_shows_a_3_mb_last_line_cut_with_its_size_and_the_lines_before(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    folder = out / "B1"
    folder.mkdir(parents=True)
    raw = folder / "raw_responses.jsonl"
    raw.write_text('{"sample_id": 1, "completion_tokens": 5, "finish_reason": "stop"}\n')
    log = tmp_path / "run.log"
    log.write_text("step 1 loaded\nstep 2 serving\n" + "\r[#####     ] 50%" * (LONG // 17))
    size = log.stat().st_size - len("step 1 loaded\nstep 2 serving\n")
    holder = f"import time; f = open({str(raw)!r}, 'ab'); time.sleep(120)"
    with open(log, "ab") as stdout:
        run = subprocess.Popen(
            [sys.executable, "-c", holder, "run_inference.py", "--datasets", "B1",
             "--output-dir", str(out)],
            cwd="/", stdout=stdout, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    app = GenTuiApp(None, hosts=[host_source("local", str(out))])
    link = app.links[0]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(lambda: app.dashboard.query("DatasetPanel"), 30, pause=pilot.pause)
            await pilot.press("L")
            await wait_until(lambda: isinstance(app.screen, LogScreen), pause=pilot.pause)
            await wait_until(lambda: "step 2" in _body(app), 30, pause=pilot.pause)
            text = _body(app)
            assert "(empty so far)" not in text
            assert "step 1 loaded" in text and "step 2 serving" in text
            assert f"(cut: the line is {size:,} bytes)" in text
            assert max(len(line) for line in text.splitlines()) <= 1100
    finally:
        app.stop_links()
        link.done.wait(timeout=30)
        run.kill()
        run.wait()
