"""The `--start` mode: a detached launch under the output folder's start lock and count.

Why a guard: a start request can reach the host late, after its sender gave up on a frozen
link and a retry already started a run; the start count lets the late one be refused, so a
dataset never gets two writers.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import typing

from .files import BadFile, create_unique, open_log, open_own, read_small
from .folders import ancestor_problem, code_folders, code_problem, folder_problem
from .names import LOG_DIR, SEQ_MAX_BYTES, START_LOCK, START_SEQ


def start_seq(output_dir: str) -> int:
    """How many starts the output folder has seen (0 for none; -1 when unreadable)."""
    path = os.path.join(os.path.expanduser(output_dir), LOG_DIR, START_SEQ)
    try:
        return int(read_small(path, SEQ_MAX_BYTES).strip() or b"0")
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, BadFile):  # a FIFO there must not hang the run list
        return -1


class StaleStart(Exception):
    """Another start came after the check this one relied on: it must not run."""

    def __init__(self, seq: int) -> None:
        super().__init__(seq)
        self.seq = seq


class StartFailed(Exception):
    """The command could not be launched; the message says why."""


_Launched = typing.TypeVar("_Launched")


def guarded_start(
    output_dir: str, expect: int | None, launch: typing.Callable[[], _Launched]
) -> _Launched:
    """`launch()` under the output folder's start lock, if its start count is still `expect`.

    Why: a start request can reach the host late, after its sender gave up on a frozen link
    and a retry checked for a live writer, found none and started one. Each start bumps the
    count, so the late one finds it moved and is refused. The count is bumped only once
    `launch` returns (the process has exec'd, so a check that reads the new count also sees
    the process), and a check reads the count before it lists the processes. `expect` None
    starts whatever the count (a start that relies on no check) and still bumps it.
    """
    folder = os.path.join(os.path.expanduser(output_dir), LOG_DIR)
    # Nothing is made in a folder someone else could swap: the output folder and every
    # folder above it are ours or root's, and not writable by others without the sticky bit.
    problem = ancestor_problem(folder)
    if problem is not None:
        raise StartFailed(problem)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StartFailed("cannot use the start lock in %s: %s" % (folder, exc.strerror)) from None
    # Its start count, lock and the relaunch logs are ours alone: no one else's links in it.
    problem = folder_problem(folder)
    if problem is not None:
        raise StartFailed(problem)
    try:
        fd = open_own(os.path.join(folder, START_LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    except BadFile as exc:
        raise StartFailed("cannot use the start lock: %s" % exc) from None
    except OSError as exc:
        raise StartFailed("cannot use the start lock in %s: %s" % (folder, exc.strerror)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        seq = start_seq(output_dir)
        if seq < 0:  # fail closed: with no count, a late start could not be told apart
            raise StartFailed(
                "cannot read the start count %s: remove it (the next start makes it anew)"
                % os.path.join(folder, START_SEQ)
            )
        if expect is not None and seq != expect:
            raise StaleStart(seq)
        result = launch()
        try:
            temp_fd, temp = create_unique(os.path.join(folder, "." + START_SEQ))
            with os.fdopen(temp_fd, "w") as handle:
                handle.write("%d\n" % (max(seq, 0) + 1))
            os.replace(temp, os.path.join(folder, START_SEQ))
        except (OSError, BadFile) as exc:
            raise StartFailed(
                "started pid %s, but could not count the start in %s (%s): it is running"
                % (getattr(result, "pid", result), folder, getattr(exc, "strerror", None) or exc)
            ) from None
        return result
    finally:
        os.close(fd)


EXIT_WRAPPER = """
import signal, subprocess, sys
path = sys.argv[1]
open(path, "w").close()
signal.signal(signal.SIGTERM, lambda *_: None)
try:
    child = subprocess.Popen(sys.argv[2:])
except OSError as exc:
    print("cannot start %s: %s" % (sys.argv[2], exc.strerror or exc), file=sys.stderr)
    code = 127
else:
    code = child.wait()
with open(path, "w") as out:
    out.write("%d\\n" % code)
sys.exit(code if code >= 0 else 128 - code)
"""
"""The program that runs a command and writes how it ended (its Popen return code: the
exit code, or minus the signal that killed it) to the file named first: the way a server
started over SSH reports its exit, since no process there is gen-tui's child. Every value
is an argument, none is spliced into the source. The file is emptied first (a stale status
is never read as this run's). Its SIGTERM handler keeps it waiting for the command when a
stop's SIGTERM reaches the whole session (the command drains, then its status is written);
a handled signal is reset to its default in the command, so that still gets SIGTERM. Python,
not a shell: a shell reports a killed command on stderr, which is the server's log."""


def launch_detached(
    argv: list[str],
    log: str,
    cwd: str | None,
    env: typing.Optional[typing.Mapping[str, str]] = None,
    exit_file: typing.Optional[str] = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a session of its own, output to `log`: the Popen, once it has exec'd.
    `env` is added to the host's environment (a server recipe's CUDA_VISIBLE_DEVICES).
    With `exit_file`, the session's leader is this Python running EXIT_WRAPPER, which
    writes the command's exit status there (the code folders checked are the command's).

    The folders it takes code from are checked last before the launch, on the host that
    runs it: a check an SSH round trip earlier would leave the time to swap them (with the
    PATH and PYTHONPATH the command will have).
    """
    environ = dict(os.environ, **env) if env else None
    log = os.path.expanduser(log)
    if cwd:
        cwd = os.path.expanduser(cwd)
        if not os.path.isdir(cwd):
            raise StartFailed("cannot cd into %s" % cwd)
    problem = code_problem(code_folders(argv, cwd, environ or os.environ))
    if problem is not None:
        raise StartFailed(problem)
    folder = os.path.dirname(log)
    try:
        if folder:
            os.makedirs(folder, exist_ok=True)
        # never through a symlink, 0600: a log in a shared folder must not clobber or
        # disclose another file (closed below, once the child has its copy)
        handle = os.fdopen(open_log(log), "ab")
    except OSError as exc:
        raise StartFailed("cannot create the log %s: %s" % (log, exc.strerror or exc)) from None
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-c",
                EXIT_WRAPPER,
                os.path.abspath(os.path.expanduser(exit_file)),
                *argv,
            ]
            if exit_file
            else argv,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=cwd or None,
            env=environ,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in a word
        why = getattr(exc, "strerror", None) or str(exc)
        raise StartFailed("cannot start %s: %s" % (argv[0] if argv else "", why)) from None
    finally:
        handle.close()


def guarded_launch(
    output_dir: str,
    expect: int | None,
    argv: list[str],
    log: str,
    cwd: str | None,
    env: typing.Optional[typing.Mapping[str, str]] = None,
    exit_file: typing.Optional[str] = None,
) -> subprocess.Popen[bytes]:
    """`launch_detached` under the output folder's start guard: the Popen."""
    return guarded_start(
        output_dir, expect, lambda: launch_detached(argv, log, cwd, env, exit_file)
    )


def start(spec: dict[str, typing.Any]) -> dict[str, typing.Any]:
    """The `--start` mode: the `start` report for one guarded, detached launch."""
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("--start needs argv: a list of strings")
    output_dir, log, cwd, expect = (spec.get(k) for k in ("output_dir", "log", "cwd", "expect"))
    if not isinstance(output_dir, str) or not isinstance(log, str):
        raise ValueError("--start needs output_dir and log: strings")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError("--start: cwd must be a string")
    if expect is not None and (isinstance(expect, bool) or not isinstance(expect, int)):
        raise ValueError("--start: expect must be an integer")
    env = spec.get("env")
    if env is not None and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ValueError("--start: env must map names to strings")
    exit_file = spec.get("exit_file")
    if exit_file is not None and (not isinstance(exit_file, str) or not exit_file):
        raise ValueError("--start: exit_file must be a non-empty string")
    try:
        child = guarded_launch(output_dir, expect, argv, log, cwd, env, exit_file)
    except StaleStart as stale:
        return {"type": "start", "refused": stale.seq}
    except StartFailed as exc:
        return {"type": "start", "error": str(exc)}
    return {"type": "start", "pid": child.pid}
