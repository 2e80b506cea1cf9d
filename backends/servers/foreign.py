"""Who holds a port on this machine: the pid and owner of a server gen-tui did not start
("not ours"), named in the question before anyone restarts it.

Why psutil's socket table and not the health URL: the answer on the port says something
serves there, not which process; the question must name the pid (and its owner, which may
be another user: then the restart's stop is refused by the host's own checks).
"""

from __future__ import annotations

import psutil

from gen_tui.backends.servers.view import Holder
from gen_tui.backends.untrusted import one_line


def holder_of(port: int) -> Holder | None:
    """The local process listening on TCP `port`, or None when none can be seen (blocks:
    call it off the UI thread)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if conn.pid is None:
            return None  # another user's socket: its pid is not shown to us
        try:
            proc = psutil.Process(conn.pid)
            user = proc.username()
            command = " ".join(proc.cmdline())
        except (psutil.Error, OSError):
            user, command = "?", ""
        return Holder(conn.pid, one_line(user, 64), one_line(command, 300))
    return None
