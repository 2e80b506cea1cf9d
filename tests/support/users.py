"""Second Unix users for the tests: another person on a shared GPU box, a csh login shell.

GPU boxes are shared: the tests that check gen-tui never touches another user's run, or
that its scripts survive a csh/tcsh login shell, need a real second account. Creating one
needs root; without it those tests skip and say why. Accounts are made once (idempotent,
safe when several test sessions race) and never removed: later sessions reuse them.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

OTHER_USER = "gentui-other"
"""Someone else on the box: owns runs and files gen-tui must not run or stop."""
ACCOUNTS_LOCK = "/tmp/gen-tui-accounts.lock"
"""Held while an account is made or changed (ensure_user)."""
CSH_USER = "gentui-csh"
"""A login whose shell is csh or tcsh (set per test)."""


def ensure_user(name: str, shell: str = "/bin/sh") -> pwd.struct_passwd:
    """The account `name` with login shell `shell`, created if missing (root only).

    Its password field is `*` (no password, not locked): sshd without PAM refuses a locked
    account even with a valid key.
    """
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second Unix user (useradd)")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    # One change to /etc/passwd at a time across test processes (xdist's workers, a second
    # session): useradd and usermod fail, not wait, when another holds its lock.
    with open(ACCOUNTS_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "-M", "-s", shell, name], capture_output=True, check=True)
            entry = pwd.getpwnam(name)
        if entry.pw_shell != shell:
            subprocess.run(["usermod", "-s", shell, name], capture_output=True, check=True)
        subprocess.run(["usermod", "-p", "*", name], capture_output=True, check=True)
    return pwd.getpwnam(name)


@contextmanager
def folder_of(user: pwd.struct_passwd, prefix: str) -> Iterator[Path]:
    """A fresh folder under /tmp owned by `user` (pytest's own are root-only), removed after."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        os.chown(folder, user.pw_uid, user.pw_gid)
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def give(path: Path, user: pwd.struct_passwd) -> Path:
    """`path` (and what is under it) owned by `user`."""
    for item in [path, *(path.rglob("*") if path.is_dir() else [])]:
        os.chown(item, user.pw_uid, user.pw_gid)
    return path


@contextmanager
def shared_folder(prefix: str, mode: int = 0o1777) -> Iterator[Path]:
    """A folder in /tmp that anyone may create names in (root's; 1777 like /tmp by
    default), where another user plants their files in the attack tests."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    folder.chmod(mode)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_PLANT = (
    "import os, sys\n"
    "open(os.path.join(sys.argv[1], 'json.py'), 'w').write(\n"
    "    'import os\\n'\n"
    '    \'if os.getuid() == 0: open(%r, "w").write("ran as root")\\n\'\n'
    "    'from importlib import import_module as _i\\n'\n"
    '    \'import sys as _s; _s.path.pop(0); _s.modules.pop("json"); _j = _i("json")\\n\'\n'
    "    'dumps = _j.dumps; dump = _j.dump; loads = _j.loads\\n' % sys.argv[2])\n"
)


def plant_module(user: pwd.struct_passwd, folder: Path, marker: Path) -> None:
    """As `user`, put a `json.py` in `folder` that writes `marker` when root imports it
    (then hands over the real json): what another user plants where we take code from."""
    subprocess.run(
        ["/usr/bin/python3", "-c", _PLANT, str(folder), str(marker)],
        user=user.pw_uid, group=user.pw_gid, cwd="/", check=True,
    )  # fmt: skip


@contextmanager
def processes_of(
    user: pwd.struct_passwd, argvs: Sequence[Sequence[str]], **popen: Any
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`argvs` running as `user` (from `/` unless `popen` gives a `cwd`, with an empty
    environment; `popen`: more of Popen's arguments, `pass_fds` say), each killed and waited
    for after."""
    procs: list[subprocess.Popen[bytes]] = []
    popen.setdefault("cwd", "/")
    try:
        for argv in argvs:
            procs.append(
                subprocess.Popen(argv, user=user.pw_uid, group=user.pw_gid, env={}, **popen)
            )
        yield procs
    finally:
        for process in procs:
            process.kill()
        for process in procs:
            process.wait()
