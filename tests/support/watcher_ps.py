"""The watcher's `--ps` report as gen-tui runs it on a GPU box: its source on the stdin of
`python3 -` (a real 3.8 where this machine has one), with the flags gen-tui gives it.

Shared by the tests that bound what another user's processes can put in that report.
"""

from __future__ import annotations

import pwd
import subprocess
import time

from gen_tui.backends import watcher
from tests.support.sshd import python38


def ps_report(user: pwd.struct_passwd | None = None) -> tuple[str, float]:
    """(the `--ps` report as the watcher prints it, the seconds it took); a failure raises.
    `user`: the watcher runs as that Unix user (from `/`), as a login that is not root."""
    started = time.monotonic()
    as_user = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid, "cwd": "/"}
    python = (python38() or "python3") if user is None else "/usr/bin/python3"  # /root's: ours
    result = subprocess.run(
        [python, *watcher.PYTHON_FLAGS, "-", f"--ps={watcher.DEFAULT_PATTERN}"],
        input=watcher.source(),
        capture_output=True,
        text=True,
        timeout=60,
        **as_user,  # type: ignore[arg-type]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, time.monotonic() - started
