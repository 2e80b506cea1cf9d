"""Resuming a dataset: refusing a second writer, and the command line to start again with.

Resume is "start again with a new budget": the engine continues from the records on disk. A
dataset whose lock a live writer holds, or that a live run writes, is refused and nothing
starts.

Whose command line: gen-tui runs only command lines of the user it acts as on the host (the
login user over SSH). Another user's run, even seen by root, and a lock file that someone
else owns or may write, are refused with one line naming the owner: running them would run
someone else's program with our rights, environment and API key.
"""

from __future__ import annotations

import posixpath
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gen_tui.backends import watcher
from gen_tui.backends.hosts.argv import DATASET_FLAGS, relative_paths, resume_argv
from gen_tui.backends.hosts.errors import ResumeRefused, RunError
from gen_tui.backends.hosts.ps import LockRecord, RunProcess


def check_budget(value: int | None, what: str) -> None:
    """Refuse a budget that is not a positive integer (None means "unchanged")."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise RunError(f"{what} must be a positive integer, got {value!r}")


def refuse_live_writers(
    host: str,
    targets: Sequence[str],
    locks: Mapping[str, LockRecord],
    live: Sequence[RunProcess],
    run: RunProcess | None,
    out_dir: str,
) -> None:
    """Raise :class:`ResumeRefused` when a target's lock is held, `run` still runs, or a
    live run in `out_dir` writes a target (`RunProcess.writing`), or is ours and names it
    (it may be starting). Another user's command line alone refuses nothing: anyone can
    write one that names our dataset."""
    for name in targets:
        lock = locks.get(name)
        if lock is not None and lock.locked:
            raise ResumeRefused(
                f"{name}: a live writer holds its lock (pid {lock.pid or '?'} on "
                f"{lock.holder.get('host', host)}); stop that run first. Nothing was started"
            )
    for other in live:
        if run is not None and other.identity.same_process(run.identity):
            raise ResumeRefused(
                f"run {run.pid} is still running; stop it first. Nothing was started"
            )
        if other.output_dir != out_dir:
            continue
        command = shlex.join(other.identity.cmdline)[:80]
        busy = sorted(set(targets) & set(other.writing))
        if busy:
            raise ResumeRefused(
                f"{', '.join(busy)}: run {other.pid} ({command}) is writing it; stop that "
                "run first. Nothing was started"
            )
        named = sorted(set(targets) & set(other.datasets)) if other.mine else []
        if named:
            raise ResumeRefused(
                f"{', '.join(named)}: run {other.pid} ({command}) names it and may be about "
                "to write it; stop that run first. Nothing was started"
            )


NOT_OURS = "runs another user's command line"


def command_for(
    run: RunProcess | None, lock: LockRecord | None, dataset: str, uid: int | None
) -> tuple[list[str], str | None]:
    """The command line to resume with, and its working directory: the run's own, else the
    one its lock file names (when it can be run from there). Either must be user `uid`'s
    (see the module's doc): else :class:`RunError` says whose it is."""
    if run is not None:
        run.refuse_unless_mine(NOT_OURS)
        if run.uid != uid:
            raise RunError(
                f"pid {run.pid} belongs to {run.owner}, not to the user gen-tui acts as on "
                f"this host: gen-tui never {NOT_OURS}"
            )
        return list(run.identity.cmdline), run.cwd
    holder: Mapping[str, Any] = lock.holder if lock is not None else {}
    argv = holder.get("argv")
    if lock is not None and argv is not None and (why := lock.distrust(uid)) is not None:
        raise RunError(
            f"{dataset}: its run.lock names a command line, but {why}: gen-tui never runs a "
            "command line from a file another user may have written"
        )
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        cwd = holder.get("cwd") if isinstance(holder.get("cwd"), str) else None
        executable = holder.get("executable")
        if argv[0].endswith(".py"):
            # `python -m gen_tui.app.cli` records the module's path as argv[0].
            argv = [executable, *argv] if isinstance(executable, str) else []
        if argv and posixpath.isabs(argv[0]) and (cwd or not relative_paths(argv)):
            return argv, cwd
    raise RunError(
        f"{dataset}: no command line to resume it with (no run seen writing it, and its "
        f"lock file names no usable one); resume it from the run list, or configure a "
        "run command template for this host"
    )


def edited_command(
    run: RunProcess | None,
    lock: LockRecord | None,
    targets: Sequence[str],
    max_tokens: int | None,
    max_samples: int | None,
    uid: int | None,
) -> tuple[list[str], str | None]:
    """:func:`command_for` with its dataset and budget flags set for the resume.

    The dataset flag is set only when the command has one or resumes part of the run: a
    script that takes no `--datasets` resumes all its datasets as launched.
    """
    argv, cwd = command_for(run, lock, targets[0], uid)
    all_of_run = run is not None and tuple(targets) == tuple(run.datasets)
    has_flag = watcher.flag_value(argv, *DATASET_FLAGS) is not None
    datasets = targets if (has_flag or not all_of_run) else None
    return resume_argv(argv, datasets, max_tokens, max_samples), cwd


def resume_log_path(out_dir: str, dataset: str) -> str:
    """Where a resumed run's output goes: the output folder's log folder, by dataset and time."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return posixpath.join(out_dir, watcher.LOG_DIR, f"{dataset}-{stamp}.log")
