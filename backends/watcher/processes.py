"""The `--ps` mode: the runs on this box from /proc, with their owners, locks and prompts.

Why from /proc and not `ps`: a GPU box may lack procps or print it differently, and /proc
also says which process holds a record file open for writing, which tells the writer from
the shells and multiplexers around it. The local host calls :func:`ps` in-process.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import time
import typing

from .command_lines import (
    _resolve,
    config_output_dir,
    is_candidate,
    output_dir_of,
    prompt_names,
    run_args,
)
from .emit import boot_id
from .locks import read_lock_table, scan_locks
from .names import DATASET_NAME, LOCK_FILE, RAW_FILE
from .starts import start_seq

CMDLINE_SHOWN = 4 << 10
"""The most of another user's command line the report carries, in bytes: 40 processes with
19 arguments of 100,000 characters each pushed the report past the SSH output bound (64
MiB) and blinded the host. Ours are carried whole: they are what `k` checks and `r` runs."""
MAX_NAMES = 256
"""The most prompt names, and record files open, the report lists for one process."""
OTHERS_WRITES = 8
"""The most record files open for writing the report lists for another user's process:
each path may be 4 KiB long, and theirs only tell a writer from the wrappers around it."""


def bounded_cmdline(info: dict[str, typing.Any]) -> None:
    """Cut `info`'s command line to CMDLINE_SHOWN bytes when it is longer, keeping the
    whole one's size and SHA-256 (of /proc/PID/cmdline without its last NUL): what a run
    list shows of another user's process, and enough to tell it from another (its identity
    compares the hash)."""
    raw = b"\0".join(word.encode("utf-8", "surrogateescape") for word in info["cmdline"])
    if len(raw) <= CMDLINE_SHOWN:
        return
    kept: list[str] = []
    room = CMDLINE_SHOWN
    for word in info["cmdline"]:
        size = len(word.encode("utf-8", "surrogateescape")) + 1
        if size > room:
            cut = word.encode("utf-8", "surrogateescape")[: max(0, room - 1)]
            kept.append(cut.decode("utf-8", "surrogateescape"))
            break
        kept.append(word)
        room -= size
    info["cmdline"] = kept
    info["cmdline_bytes"] = len(raw)
    info["cmdline_sha256"] = hashlib.sha256(raw).hexdigest()


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
            if len(found) >= MAX_NAMES:
                break
    return found


def _record_writers(info: dict[str, typing.Any], dirs: set[str]) -> list[list[str]]:
    """[[output folder, dataset], ...] whose record file `info`'s process has open for
    writing, and may write: a lock-less script's way of being a dataset's writer.

    Only a process of ours or of the dataset folder's owner counts. Why: a command line
    is anyone's to write (another user's `sleep` whose argv names our dataset took it over:
    `r` refused, `k` offered), and a file open for writing is a writer only when its
    writer belongs there.
    """
    found: list[list[str]] = []
    real = {}
    for folder in dirs:
        real[os.path.realpath(folder)] = folder
    for target in info.get("writes") or []:
        dataset_dir = os.path.dirname(target)
        name = os.path.basename(dataset_dir)
        if os.path.dirname(dataset_dir) not in real or not DATASET_NAME.match(name):
            continue
        folder = real[os.path.dirname(dataset_dir)]
        try:
            owner = os.stat(dataset_dir).st_uid
        except OSError:
            continue
        if info.get("uid") in (os.getuid(), owner) and [folder, name] not in found:
            found.append([folder, name])
    return found


def _held_by(
    entries: dict[str, dict[str, typing.Any]], procs: list[dict[str, typing.Any]]
) -> dict[str, dict[str, typing.Any]]:
    """Of a folder a listed process's command line named (not the one asked about): the
    locks those processes hold, at most MAX_NAMES, and what the lock file says only for
    ours. Why: anyone's command line can name a folder of 10,000 dataset folders with 16
    KiB lock files each; what the run list needs of it is who holds which lock."""
    listed = {info["pid"]: info for info in procs}
    kept: dict[str, dict[str, typing.Any]] = {}
    for name, entry in entries.items():
        holder = listed.get(entry.get("pid")) if entry.get("locked") else None
        if holder is None:
            continue
        if holder.get("uid") != os.getuid():
            entry["holder"] = {}
        kept[name] = entry
        if len(kept) >= MAX_NAMES:
            break
    return kept


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


def _written_folder(writes: list[str] | None, asked: str | None) -> str | None:
    """The output folder of a process whose command line names none (a script's own flags,
    a `--config`), from the record files it holds open for writing: `asked` when one is
    there, else the first one's. None: it writes none (yet). Taken for the watched folder,
    another user's script naming `--datasets D0` while writing its own folder made a "not
    started" D0 panel there (issue 31, point 1)."""
    folders = [os.path.dirname(os.path.dirname(target)) for target in writes or []]
    if not folders:
        return None
    if asked:
        here = os.path.realpath(os.path.expanduser(asked))
        if here in folders:
            return os.path.normpath(os.path.expanduser(asked))
    return folders[0]


def _as_asked(folder: str | None, asked: str | None) -> str | None:
    """`folder` (resolved through links, as a run resolves its config's output_dir) spelt
    as the watched folder `asked` when it is that folder, so the two compare equal."""
    if folder and asked:
        spelt = os.path.normpath(os.path.expanduser(asked))
        if os.path.realpath(spelt) == folder:
            return spelt
    return folder


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
        info["uid"] = proc_uid(pid)
        info["user"] = user_name(info["uid"])
        if info["uid"] != os.getuid():
            bounded_cmdline(info)  # what follows is read from what is shown
        args = run_args(info["cmdline"])
        info["args"] = args
        info["writes"] = record_writes(pid)
        if info["uid"] != os.getuid() and info["writes"]:
            info["writes"] = info["writes"][:OTHERS_WRITES]
        prompts = _resolve(args["prompts_dir"], info["cwd"])
        info["prompt_names"] = prompt_names(prompts)[:MAX_NAMES] if prompts else []
        folder = output_dir_of(info["cmdline"], info["cwd"])
        unknown = None
        if folder is None:
            folder, unknown = config_output_dir(info["cmdline"], info["cwd"])
            folder = _as_asked(folder, output_dir)
        info["output_dir_abs"] = folder or _written_folder(info["writes"], output_dir)
        # Counted in no watched folder (the panel's fallback) until it writes somewhere.
        info["output_dir_unknown"] = None if info["output_dir_abs"] else unknown
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
    asked = os.path.normpath(os.path.expanduser(output_dir)) if output_dir else None
    locks = {folder: scan_locks(folder, table) for folder in sorted(dirs)}
    for folder in locks:
        if folder != asked:
            locks[folder] = _held_by(locks[folder], procs)
    for info in procs:
        info["writes_datasets"] = _record_writers(info, dirs)
    for folder, entries in locks.items():
        for name, entry in entries.items():
            entry["file"] = file_owner(os.path.join(folder, name, LOCK_FILE))
    uid = os.getuid()
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
