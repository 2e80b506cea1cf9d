"""`v` (the last answers) and `L` (the run's log) on what another user's run wrote.

The attacker is a second Unix user whose run writes a dataset in a shared output folder
gen-tui (as root) watches: its records carry terminal escapes (OSC 52 clipboard, OSC 0
title, clear screen, C1 CSI), bidi overrides, Rich markup and a megabyte answer, its
figures absurd values; its stdout is a file whose very name holds an escape, and the log's
lines the same and a 3 MB line. The real app, a real process: both screens open, draw
every string as plain data, bounded, with no control character left, and the app stays up.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from rich.text import Text
from textual.widgets import Label, Static

from gen_tui.app.dialogs.peek import LogScreen, SampleScreen
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.untrusted import SHOWN_CHARS
from tests.support.polling import wait_until
from tests.support.tui import SIZE, Notes
from tests.support.users import OTHER_USER, ensure_user, shared_folder

NASTY = "\x1b]52;c;cHduZWQ=\x07\x1b]0;TITLE\x07\x1b[2J\x1b[H\x9b2J\u202eevil\u202c[/x][bold]"
SLEEPER = (
    "import sys, time; records = open(sys.argv[-1] + '/B1/raw_responses.jsonl', 'a'); "
    "time.sleep(120)"
)
"""Their lock-less script: it holds the record file open for writing, which is what makes
a process without the lock the dataset's writer (a command line alone does not)."""
RECORDS = [
    {"sample_id": NASTY, "finish_reason": NASTY, "completion_tokens": 5, "text": NASTY,
     "reasoning": NASTY, "latency_s": 1e308},
    {"sample_id": 2, "finish_reason": "stop", "completion_tokens": 10**18,
     "text": "x" * 1_000_000, "latency_s": -3},
    {"sample_id": ["a", {"b": 1}], "finish_reason": {"x": NASTY}, "text": {"t": 1},
     "reasoning": [NASTY], "prompt_tokens": "many"},
]  # fmt: skip


def _drawn(app: GenTuiApp) -> str:
    """Every string the screen draws: its title and body, as plain text."""
    parts = []
    for widget in [*app.screen.query(Static), *app.screen.query(Label)]:
        rendered = widget.render()
        parts.append(rendered.plain if isinstance(rendered, Text) else str(rendered))
    return "\n".join(parts)


def _safe(text: str) -> None:
    bad = [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    bad += [c for c in text if c in "\u202a\u202b\u202c\u202d\u202e" or "\ud800" <= c <= "\udfff"]
    at = [text[max(0, i - 60) : i + 20] for i, c in enumerate(text) if c in bad][:3]
    assert not bad, (sorted(set(map(ascii, bad))), at)
    assert "[/x]" in text, "markup is shown as text"


async def test_v_and_l_show_another_users_hostile_records_and_log_as_plain_data(
    tmp_path: Path,
) -> None:
    other = ensure_user(OTHER_USER)
    with shared_folder("gen-tui-hostile-peek-") as out:
        folder = out / "B1"
        folder.mkdir()
        lines = [json.dumps(record) for record in RECORDS]
        (folder / "raw_responses.jsonl").write_text("\n".join(lines) + "\n")
        log = out / f"log{NASTY[:12]}.txt"
        log.write_text(f"step 1 {NASTY}\n" + "y" * 3_000_000 + f"\nlast line {NASTY}\n")
        for path in (folder, folder / "raw_responses.jsonl", log):
            os.chown(path, other.pw_uid, other.pw_gid)
        with open(log, "ab") as stdout:
            theirs = subprocess.Popen(
                ["/usr/bin/python3", "-c", SLEEPER, "run_inference.py", "--datasets", "B1",
                 "--output-dir", str(out)],
                cwd="/", user=other.pw_uid, group=other.pw_gid, stdout=stdout,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        app = GenTuiApp(None, hosts=[host_source("local", str(out))])
        link = app.links[0]
        notes = Notes()
        try:
            async with app.run_test(size=SIZE, message_hook=notes) as pilot:
                await wait_until(lambda: app.dashboard.query("DatasetPanel"), 30, pause=pilot.pause)
                await pilot.press("v")
                screen = await wait_until(
                    lambda: isinstance(app.screen, SampleScreen) and app.screen, pause=pilot.pause
                )
                await wait_until(lambda: screen.samples, 30, "the answers read", pause=pilot.pause)
                drawn = _drawn(app)
                _safe(drawn)
                assert len(screen.samples) == 3
                assert "0" * 20 not in drawn and "-3.00 s" not in drawn, "absurd latencies"
                assert len(drawn) < 3 * 6000 + 3 * 3000, len(drawn)
                await pilot.press("escape")
                await wait_until(lambda: app.screen is app.dashboard, pause=pilot.pause)
                await pilot.press("L")
                await wait_until(lambda: isinstance(app.screen, LogScreen), pause=pilot.pause)
                await wait_until(lambda: "last line" in _drawn(app), 30, pause=pilot.pause)
                drawn = _drawn(app)
                _safe(drawn)
                assert max(len(line) for line in drawn.splitlines()) <= SHOWN_CHARS + 40
                await pilot.press("escape")
                assert app.is_running
        finally:
            app.stop_links()
            link.done.wait(timeout=30)
            theirs.kill()
            theirs.wait()
