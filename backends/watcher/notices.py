"""A drain notice written on this box for a panel on another machine (issue 32).

Why here: a run ignores a notice whose writer is gone, but it can only tell for a writer of
its own machine. A panel stopping a server over SSH is another machine's process, so a
notice naming it stayed honoured after the panel died (a run with another server up avoided
that port until someone removed the file). So the notice written over SSH names, as its
writer, the process here that carries the panel's link: the SSH server's session process
(the nearest ancestor named in LINK_NAMES). When the panel dies its connection closes and
that process ends with it, so the runs here see the writer gone at their next look, and
drop the notice LINK_HOLD_S later (backends/drain_notice.py: time for a panel whose link
only dropped to reconnect and write it again; the writer says `link`). Where no such
ancestor is found, the panel's own identity stays (the runs then bound the notice by the
wait it promised).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import typing

from .processes import _clock, proc_info

LINK_NAMES = ("sshd", "sshd-session", "dropbear")
"""The process names (/proc/PID/comm) of an SSH server's per-connection process."""
MAX_NOTICE_TEXT = 4096
"""A notice is a few hundred bytes: more is refused (the runs read 4 KiB at most)."""


def _comm(pid: int) -> str:
    try:
        with open("/proc/%d/comm" % pid) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def link_writer() -> dict[str, typing.Any] | None:
    """The writer a notice names for the panel whose link runs this program: the nearest
    ancestor that is an SSH server's session process (host, pid, start time as the runs'
    psutil reads it); None when there is none (not over SSH, or no /proc)."""
    btime, hz = _clock()
    pid = os.getppid()
    seen = 0
    while pid > 1 and seen < 64:
        info = proc_info(pid, btime, hz)
        if info is None:
            return None
        if _comm(pid) in LINK_NAMES:
            return {
                "host": socket.gethostname(),
                "pid": pid,
                "started": info["start_time"],
                "link": "the SSH session of the panel's link",
            }
        pid = info["ppid"]
        seen += 1
    return None


def notice_request(spec: dict[str, typing.Any]) -> dict[str, typing.Any]:
    """The `--notice` mode (`folder`, `name`, `notice`: the notice's JSON object): write it
    whole (a temporary file of the folder, made 0700, then renamed), its writer replaced by
    the link's process when there is one. One `notice` line: its path and writer."""
    folder, name, notice = spec.get("folder"), spec.get("name"), spec.get("notice")
    if not isinstance(folder, str) or not folder or not isinstance(name, str):
        raise ValueError("--notice needs folder and name: strings")
    if "/" in name or name in ("", ".", ".."):
        raise ValueError("--notice: name must be a file name")
    if not isinstance(notice, dict):
        raise ValueError("--notice needs notice: a JSON object")
    writer = link_writer()
    if writer is not None:
        notice = dict(notice, writer=writer)
    text = json.dumps(notice)
    if len(text) > MAX_NOTICE_TEXT:
        raise ValueError(
            "--notice: a notice of %d bytes (%d at most)" % (len(text), MAX_NOTICE_TEXT)
        )
    old = os.umask(0o077)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".notice.")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.replace(temp, os.path.join(folder, name))
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise
    finally:
        os.umask(old)
    return {"type": "notice", "path": os.path.join(folder, name), "writer": notice.get("writer")}
