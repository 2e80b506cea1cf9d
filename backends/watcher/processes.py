"""The `--ps` mode: the runs on this box from /proc, with their owners, locks and prompts.

Why from /proc and not `ps`: a GPU box may lack procps or print it differently, and /proc
also says which process holds a record file open for writing, which tells the writer from
the shells and multiplexers around it. The local host calls :func:`ps` in-process.
"""

from __future__ import annotations

import os
import re
import socket
import time
import typing

from .command_lines import _resolve, is_candidate, output_dir_of, prompt_names, run_args
from .emit import boot_id
from .locks import read_lock_table, scan_locks
from .names import LOCK_FILE, RAW_FILE
from .starts import start_seq


def record_writes(pid: int) -> list[str] | None:
    """The record files (`raw_responses.jsonl`) `pid` holds open for writing, from
    /proc/PID/fd; None where that cannot be read (another user's process, unless root).

    This is what tells the writer from the wrappers around it (a `bash -lc`, a screen
    window) whose command lines name the same run.
    """
    folder = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(folder)
    except OSError:
        return None
    found: list[str] = []
    for fd in fds:
        try:
            target = os.readlink(os.path.join(folder, fd))
        except OSError:
            continue
        if os.path.basename(target) != RAW_FILE:
            continue
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as handle:
                flags = next((r.split()[1] for r in handle if r.startswith("flags:")), "0")
        except (OSError, IndexError):
            continue
        if int(flags, 8) & 3 and target not in found:  # O_WRONLY or O_RDWR
            found.append(target)
    return found


def _parents(pid: int, ppid: int, limit: int = 64) -> list[int]:
    """The ancestors of a process, nearest first (`ppid` given, the rest read from /proc)."""
    out: list[int] = []
    while ppid and ppid > 1 and len(out) < limit:
        out.append(ppid)
        try:
            with open("/proc/%d/stat" % ppid, "rb") as handle:
                ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def writers_only(procs: list[dict[str, typing.Any]]) -> list[dict[str, typing.Any]]:
    """The runs among matching processes: a wrapper around a run is not one.

    A process that holds a record file open for writing is a run. One that does not is
    left out when a matching process below it in the process tree is listed (it only
    wraps that one: `bash -lc "python run_inference.py"`, `sudo -u`, a screen window) or
    when one above it writes (it is that writer's helper). So `k` stops the process that
    writes, never a shell or a multiplexer around it.
    """
    by_pid = {info["pid"]: info for info in procs}
    above = {info["pid"]: [p for p in _parents(info["pid"], info["ppid"]) if p in by_pid]
             for info in procs}  # fmt: skip
    wraps = {parent for parents in above.values() for parent in parents}
    kept = []
    for info in procs:
        if info.get("writes"):
            kept.append(info)
            continue
        if info["pid"] in wraps:
            continue
        if any(by_pid[parent].get("writes") for parent in above[info["pid"]]):
            continue
        kept.append(info)
    return kept


def _ancestors() -> set[int]:
    """Our own pid and its parents: the shell that runs us mentions the pattern too."""
    out: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open("/proc/%d/stat" % pid, "rb") as handle:
                pid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def proc_info(pid: int, btime: float, hz: int) -> dict[str, typing.Any] | None:
    """Identity and state of one process from /proc (None when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            stat = handle.read()
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[1].split()
    try:
        cwd = os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        cwd = None
    ticks = int(fields[19])
    argv = [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0")]
    if argv and argv[-1] == "":
        argv.pop()
    return {
        "pid": pid,
        "ppid": int(fields[1]),
        "pgid": int(fields[2]),
        "state": fields[0].decode(),
        "start_ticks": ticks,
        "start_time": btime + ticks / float(hz),
        "cmdline": argv,
        "cwd": cwd,
    }


def proc_uid(pid: int) -> int | None:
    """The real uid that owns a process (None when it is gone): runs of other users are
    listed, and this lets a client tell them apart."""
    try:
        with open("/proc/%d/status" % pid) as handle:
            for row in handle:
                if row.startswith("Uid:"):
                    return int(row.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


_NAMES: dict[int, str | None] = {}


def user_name(uid: int | None) -> str | None:
    """The login name of `uid` (None when the box has none): shown beside another user's run."""
    if uid is None:
        return None
    if uid not in _NAMES:
        try:
            import pwd

            _NAMES[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            _NAMES[uid] = None
    return _NAMES[uid]


def file_owner(path: str) -> dict[str, typing.Any]:
    """Who owns `path` and its folder, and who may write them: a command line taken from a
    lock file is run only when its owner, and no one else, can have written it.

    The file is looked at without following a link (a link is never trusted), the folder
    through one (its target is what holds the file).
    """
    out: dict[str, typing.Any] = {}
    try:
        st = os.lstat(path)
        out.update(uid=st.st_uid, user=user_name(st.st_uid), mode=st.st_mode)
        folder = os.stat(os.path.dirname(path))
        out.update(dir_uid=folder.st_uid, dir_user=user_name(folder.st_uid))
        out.update(dir_mode=folder.st_mode)
    except OSError:
        pass
    return out


def _clock() -> tuple[float, int]:
    btime = 0.0
    try:
        with open("/proc/stat") as handle:
            for row in handle:
                if row.startswith("btime "):
                    btime = float(row.split()[1])
                    break
    except OSError:
        pass
    return btime, os.sysconf("SC_CLK_TCK")


def folder_missing(path: str) -> str | None:
    """Why the watched output folder cannot hold datasets, or None: said on the panel, since
    an empty screen for a mistyped path looks like a host with nothing running."""
    if not os.path.exists(path):
        return "does not exist"
    if not os.path.isdir(path):
        return "is not a directory"
    if not os.access(path, os.R_OK | os.X_OK):
        return "cannot be read (permission denied)"
    return None


def ps(
    pattern: str, output_dir: str | None, pids: list[int] | None = None
) -> dict[str, typing.Any]:
    """The `ps` report: matching (or given) processes, their prompt folders and the locks."""
    seq = start_seq(output_dir) if output_dir else None  # before the processes: see start
    regex = re.compile(pattern)
    btime, hz = _clock()
    mine = _ancestors()
    procs = []
    if pids is not None:
        candidates = pids
    else:
        candidates = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    for pid in candidates:
        if pid in mine:
            continue
        info = proc_info(pid, btime, hz)
        if info is None:
            continue
        if pids is None and (
            info["state"] in ("Z", "X") or not is_candidate(info["cmdline"], regex)
        ):
            continue
        args = run_args(info["cmdline"])
        info["args"] = args
        info["writes"] = record_writes(pid)
        info["uid"] = proc_uid(pid)
        info["user"] = user_name(info["uid"])
        prompts = _resolve(args["prompts_dir"], info["cwd"])
        info["prompt_names"] = prompt_names(prompts) if prompts else []
        info["output_dir_abs"] = output_dir_of(info["cmdline"], info["cwd"])
        procs.append(info)
    if pids is None:
        procs = writers_only(procs)
    table = read_lock_table()
    dirs = set()
    if output_dir:
        dirs.add(os.path.normpath(os.path.expanduser(output_dir)))
    for info in procs:
        if info["output_dir_abs"]:
            dirs.add(info["output_dir_abs"])
    locks = {folder: scan_locks(folder, table) for folder in sorted(dirs)}
    for folder, entries in locks.items():
        for name, entry in entries.items():
            entry["file"] = file_owner(os.path.join(folder, name, LOCK_FILE))
    uid = os.getuid()
    asked = os.path.normpath(os.path.expanduser(output_dir)) if output_dir else None
    return {
        "type": "ps",
        "output_dir_problem": folder_missing(asked) if asked else None,
        "host": socket.gethostname(),
        "uid": uid,
        "user": user_name(uid),
        "boot_id": boot_id(),
        "time": time.time(),
        "output_dir": os.path.normpath(os.path.expanduser(output_dir)) if output_dir else None,
        "start_seq": seq,
        "procs": procs,
        "locks": locks,
    }
