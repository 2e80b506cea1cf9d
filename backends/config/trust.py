"""Which files may steer gen-tui: a config file, and any file a config names as code or
secrets, must be ours (or root's) and writable by nobody else.

Why: a bare `gen-tui` reads `./gen-tui.toml`, and a config says which servers get our
prompts, which endpoints our alerts, what `r` runs. In a shared folder (a 1777 scratch
space), another user's `gen-tui.toml` was obeyed: `cd` there, `gen-tui`, `s`, and their
server received our prompts, their endpoint our alerts. A file someone else owns, or may
write, says what they want, not what we do; it is refused in one line naming its owner and
mode. The check is on the opened file (fstat), so a swap after it changes nothing.
"""

from __future__ import annotations

import os
import stat

from gen_tui.backends.watcher import user_name

__all__ = ["read_trusted", "trust_problem"]

MAX_TRUSTED_BYTES = 1 << 20
"""The most of such a file read: a config is a few KB."""


def trust_problem(path: os.PathLike[str] | str, st: os.stat_result, what: str) -> str | None:
    """Why the file `path` (its stat `st`) may not steer us, in one line naming its owner and
    mode; None when we or root own it and neither its group nor others may write it."""
    me = os.geteuid()
    uid, mode = st.st_uid, stat.S_IMODE(st.st_mode)
    name = user_name(uid)
    owner = f"{name} (uid {uid})" if name else f"uid {uid}"
    if uid not in (me, 0):
        who = f"it belongs to {owner}, not to you (uid {me}) or root (mode {mode:04o})"
    elif mode & 0o022:
        writers = "others" if mode & 0o002 else "its group"
        who = f"{writers} may write it (mode {mode:04o}, owner {owner})"
    else:
        return None
    return (
        f"refusing {what} {os.fspath(path)}: {who}; a {what} must be yours or root's and "
        "writable by nobody else"
    )


def read_trusted(path: os.PathLike[str] | str, what: str) -> bytes:
    """The bytes of `path` once it passes `trust_problem` (else PermissionError with its
    line). A link is followed (a config kept in a dotfiles folder) and the file it reaches
    is the one checked; a FIFO or device is refused without blocking. Raises OSError."""
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"refusing {what} {os.fspath(path)}: not a regular file")
        problem = trust_problem(path, st, what)
        if problem is not None:
            raise PermissionError(problem)
        chunks = []
        size = 0
        while size <= MAX_TRUSTED_BYTES and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_TRUSTED_BYTES:
            raise OSError(f"{what} {os.fspath(path)} is over {MAX_TRUSTED_BYTES >> 20} MB")
        return b"".join(chunks)
    finally:
        os.close(fd)
