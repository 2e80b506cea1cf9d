"""One writer per dataset: an `flock` on `run.lock` held for the writer's whole life.

The kernel drops the lock when the process dies, however it dies, so the lock can never go
stale and the file is never unlinked. Its content names the holder for the refusal message.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
import time
from pathlib import Path

import orjson

from gen_tui.backends import watcher


class LockHeld(Exception):
    """Another live process writes this dataset."""

    def __init__(self, path: Path, holder: dict[str, object]) -> None:
        self.path = path
        self.holder = holder
        pid = holder.get("pid", "?")
        host = holder.get("host", "?")
        super().__init__(
            f"{path.parent.name}: already being written by pid {pid} on {host} "
            f"(lock {path}); stop that run first"
        )


def read_holder(path: Path) -> dict[str, object]:
    """What the current or last holder wrote into the lock file (empty if unreadable)."""
    return watcher.read_holder(os.fspath(path))


class DatasetLock:
    """Exclusive, non-blocking lock of one dataset folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def acquire(self) -> None:
        # Never through a symlink, and a regular file only (BadFile, one line): a planted
        # link would have us truncate and overwrite a file of the link maker's choosing.
        fd = watcher.open_own(os.fspath(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockHeld(self.path, read_holder(self.path)) from None
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": round(time.time(), 3),
            "argv": sys.argv,
            "executable": sys.executable,
            "cwd": os.getcwd(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(holder), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0
