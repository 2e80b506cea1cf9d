"""Who holds a dataset's run.lock: read from /proc/locks, never by taking the lock.

Why a module of its own: the watcher polls every dataset's lock every half second, and a
probe that took even a shared flock could make a starting writer's non-blocking flock fail;
the local host, the run list and the panels all ask the same question through here.
"""

from __future__ import annotations

import fcntl
import os
import typing

from .files import BadFile, _json_object, _kind, is_regular, open_regular, read_small
from .names import DATASET_NAME, HOLDER_MAX_BYTES, LOCK_FILE, RAW_FILE


def read_lock_table() -> dict[tuple[int, int, int], int] | None:
    """(major, minor, inode) -> pid of every flock holder, from /proc/locks (Linux).

    Reading /proc/locks never touches the lock itself, so a watcher polling it cannot make a
    starting writer's non-blocking `flock` fail. None where /proc/locks is unavailable.
    """
    try:
        with open("/proc/locks") as handle:
            text = handle.read()
    except OSError:
        return None
    table: dict[tuple[int, int, int], int] = {}
    for row in text.splitlines():
        parts = row.split()
        if len(parts) < 6 or parts[1] == "->" or parts[1] != "FLOCK":
            continue
        try:
            pid = int(parts[4])
            major, minor, inode = parts[5].split(":")
            table[(int(major, 16), int(minor, 16), int(inode))] = pid
        except ValueError:
            continue
    return table


def read_holder(path: str) -> dict[str, typing.Any]:
    """What the current or last writer wrote into its lock file (empty if unreadable)."""
    return _holder(path)[0]


def _holder(path: str) -> tuple[dict[str, typing.Any], str | None]:
    """(holder dict, problem or None) of a lock file: an absent or empty file is no problem."""
    try:
        data = read_small(path, HOLDER_MAX_BYTES)
        if not data.strip():
            return {}, None  # a writer between its truncate and its write
        return _json_object(data, LOCK_FILE), None
    except FileNotFoundError:
        return {}, None
    except BadFile as exc:
        return {}, str(exc)
    except OSError as exc:
        return {}, "%s is unreadable (%s)" % (os.path.basename(path), exc.strerror)


def lock_status(
    path: str, table: dict[tuple[int, int, int], int] | None
) -> tuple[bool, int | None, dict[str, typing.Any]]:
    """(locked, pid of the live holder or None, holder dict) of a dataset's `run.lock`."""
    return _lock_status(path, table)[:3]


def _lock_status(
    path: str, table: dict[tuple[int, int, int], int] | None
) -> tuple[bool, int | None, dict[str, typing.Any], str | None]:
    """`lock_status` and the lock file's problem (None when it is sound or absent).

    Only a regular file is a lock: a writer opens it with O_NOFOLLOW, so a symlink or a FIFO
    planted under the name is never one (and is neither followed nor opened here).
    """
    try:
        st = os.lstat(path)
    except OSError:
        return False, None, {}, None
    if not is_regular(st.st_mode):
        return False, None, {}, "%s is %s, not a regular file" % (LOCK_FILE, _kind(st.st_mode))
    holder, problem = _holder(path)
    if table is not None:
        pid = table.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
        if pid is None:
            return False, None, holder, problem
        if pid <= 0:
            # Held by a process outside our pid namespace: trust the file's word for the pid.
            pid = holder.get("pid") if isinstance(holder.get("pid"), int) else None
        return True, pid, holder, problem
    try:
        fd = open_regular(path)
    except (OSError, BadFile):
        return False, None, holder, problem
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        pid = holder.get("pid") if isinstance(holder.get("pid"), int) else None
        return True, pid, holder, problem
    finally:
        os.close(fd)
    return False, None, holder, problem


def scan_locks(
    output_dir: str, table: dict[tuple[int, int, int], int] | None
) -> dict[str, dict[str, typing.Any]]:
    """{dataset: {locked, pid, holder}} for each dataset folder of `output_dir`.

    A dataset folder holds a lock file or a record file: a foreign script writes no lock,
    and its datasets must still be found (unlocked, no holder).
    """
    out: dict[str, dict[str, typing.Any]] = {}
    try:
        names = sorted(os.listdir(output_dir))
    except OSError:
        return out
    for name in names:
        if not DATASET_NAME.match(name):
            continue
        path = os.path.join(output_dir, name, LOCK_FILE)
        if os.path.exists(path):
            locked, pid, holder = lock_status(path, table)
        elif os.path.exists(os.path.join(output_dir, name, RAW_FILE)):
            locked, pid, holder = False, None, {}
        else:
            continue
        out[name] = {"locked": locked, "pid": pid, "holder": holder}
    return out
