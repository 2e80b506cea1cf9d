"""The watcher's `--ps` report as gen-tui runs it on a GPU box: its source on the stdin of
`python3 -` (a real 3.8 where this machine has one), with the flags gen-tui gives it.

Shared by the tests that bound what another user's processes can put in that report.
"""

from __future__ import annotations

import subprocess
import time

from gen_tui.backends import watcher
from tests.support.sshd import python38


def ps_report() -> tuple[str, float]:
    """(the `--ps` report as the watcher prints it, the seconds it took); a failure raises."""
    started = time.monotonic()
    result = subprocess.run(
        [python38() or "python3", *watcher.PYTHON_FLAGS, "-", f"--ps={watcher.DEFAULT_PATTERN}"],
        input=watcher.source(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, time.monotonic() - started
