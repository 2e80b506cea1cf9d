"""Safe reads and writes in a dataset folder that other users may share.

Why: any file there may be a symlink to someone's secret, a FIFO that blocks an open() for
ever, or megabytes of JSON nested 100,000 deep. Every read and write of the watcher and of
gen-tui's own record code goes through these few functions, so each danger is handled once.
"""

from __future__ import annotations

import json
import os
import typing

from .names import MAX_DEPTH

# -- reading a dataset folder's files -------------------------------------------------------
#
# The folders may sit on a box shared with other users, so any file in them may be a symlink
# to someone's secret, a FIFO that blocks an open() for ever, megabytes of JSON or JSON nested
# 100,000 deep. Every read goes through `open_regular`: no symlink followed, never blocking,
# regular files only; small files are read whole only up to a bound. A bad file is a
# `BadFile`, reported for its dataset alone.

_S_IFMT = 0o170000
_S_IFREG = 0o100000
_S_IFLNK = 0o120000
_KINDS = {0o140000: "a socket", 0o120000: "a symlink", 0o060000: "a block device"}
_KINDS.update({0o040000: "a folder", 0o020000: "a character device", 0o010000: "a FIFO"})
# O_NOFOLLOW and O_NONBLOCK exist on every POSIX system the watcher runs on.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class BadFile(OSError):
    """A file or folder that is not what a dataset folder's must be; the message is one line.

    An OSError, so a caller that already reports "cannot write in FOLDER: ..." for a failed
    open reports this one too, in its own words (its `strerror` is None, `str()` the line).
    """


def _kind(mode: int) -> str:
    return _KINDS.get(mode & _S_IFMT, "not a regular file")


def is_regular(mode: int) -> bool:
    return mode & _S_IFMT == _S_IFREG


def open_regular(path: str, flags: int = _READ_FLAGS) -> int:
    """An fd of `path`, which must be a regular file: never a symlink's target, never a FIFO
    or device (checked before opening, so a tape is not rewound, and on the open fd).

    Raises FileNotFoundError when absent, BadFile when it is something else, OSError.
    """
    st = os.lstat(path)
    if not is_regular(st.st_mode):
        raise BadFile("%s is %s, not a regular file" % (os.path.basename(path), _kind(st.st_mode)))
    # A symlink swapped in after the lstat fails here with ELOOP: an OSError like any other.
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not is_regular(st.st_mode):  # swapped between the lstat and the open
        os.close(fd)
        raise BadFile("%s is %s, not a regular file" % (os.path.basename(path), _kind(st.st_mode)))
    return fd


def open_named(path: str) -> int:
    """An fd of the regular file `path` names, a link in it followed to its final target.

    For a file a run names (its prompt file), where `open_regular` is for the files found in
    a dataset folder. Why follow links here: prompt caches hold their files as links, and
    links we (or root) made are ours to follow. Why no owner check on the file: prompt files
    are shared (a team's datasets), read as the user, for the user, by the engine and the
    sample viewer alike. What is never done: open a FIFO or a device (a FIFO blocks the open for
    ever, a tape rewinds), checked on the target before the open and again on the open fd
    (it may be swapped in between); the open itself never waits.

    One owner rule, on links only: a link in the path that another user made (not us, not
    root) is refused. A user who may create names in a shared prompt folder cannot read our
    files, but a link of theirs would have us read one (a key, a token file) and send it to
    a server as prompts, or quote it in a reason.

    Raises FileNotFoundError when absent, BadFile (one line naming `path`), OSError.
    """
    foreign = foreign_link(path)
    if foreign:
        raise BadFile(
            "refusing %s: %s is a link made by uid %d, not by you (uid %d), and would have "
            "you read a file of their choosing; copy the file or make the link yourself"
            % (path, foreign[0], foreign[1], os.geteuid())
        )
    st = os.stat(path)
    if not is_regular(st.st_mode):
        raise BadFile(_not_regular(path, st.st_mode))
    fd = os.open(path, _READ_FLAGS & ~os.O_NOFOLLOW)
    st = os.fstat(fd)
    if not is_regular(st.st_mode):  # swapped between the stat and the open
        os.close(fd)
        raise BadFile(_not_regular(path, st.st_mode))
    return fd


def lineage(path: str) -> list[str]:
    """`path` made absolute and every folder above it, from the root down to it."""
    at = os.path.abspath(path)
    chain = [at]
    while os.path.dirname(at) != at:
        at = os.path.dirname(at)
        chain.append(at)
    return chain[::-1]


def linked_by_another(st: os.stat_result) -> bool:
    """Whether `st` (an lstat) is a link someone other than us or root made: they can
    re-point it at any time."""
    return st.st_mode & _S_IFMT == _S_IFLNK and st.st_uid not in (os.geteuid(), 0)


def foreign_link(path: str) -> tuple[str, int] | tuple[()]:
    """The first link in `path`, from the root down, that someone other than us or root
    made: (that component, its owner's uid), or () when there is none.

    Whoever made a link can re-point it at any time, so nothing reached through it (a
    prompt file, a code or dataset folder) is what was checked. Parts that cannot be read
    are passed over: whoever opens the path says why.
    """
    for part in lineage(path):
        try:
            st = os.lstat(part)
        except OSError:
            continue
        if linked_by_another(st):
            return (part, st.st_uid)
    return ()


def _not_regular(path: str, mode: int) -> str:
    """Why `path` (followed) is no file to read: what it is, and that a link led there."""
    if os.path.islink(path):
        return "%s is a link to %s, not a regular file" % (path, _kind(mode))
    return "%s is %s, not a regular file" % (path, _kind(mode))


def read_small(path: str, limit: int) -> bytes:
    """The whole of a small regular file, at most `limit` bytes (BadFile if bigger)."""
    fd = open_regular(path)
    try:
        parts = []
        size = 0
        while size <= limit:
            part = os.read(fd, limit + 1 - size)
            if not part:
                break
            parts.append(part)
            size += len(part)
    finally:
        os.close(fd)
    if size > limit:
        raise BadFile(
            "%s is over %s bytes, more than such a file ever holds"
            % (os.path.basename(path), "{:,}".format(limit))
        )
    return b"".join(parts)


def _deeper_than(value: object, depth: int) -> bool:
    """Whether parsed JSON nests more than `depth` levels (walked without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level >= depth:
                return True
            items = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in items)
    return False


def read_json_object(path: str, limit: int) -> dict[str, typing.Any]:
    """The JSON object in a small file of a dataset folder.

    Raises FileNotFoundError when absent, OSError, and BadFile (one line) for anything else:
    not a regular file, too big, not JSON, nested too deeply, not an object.
    """
    return _json_object(read_small(path, limit), os.path.basename(path))


def _json_object(data: bytes, name: str) -> dict[str, typing.Any]:
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise BadFile("%s is JSON nested too deeply" % name) from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise BadFile("%s is not valid JSON (%s)" % (name, str(exc)[:80])) from None
    if not isinstance(value, dict):
        raise BadFile("%s holds no JSON object" % name)
    if _deeper_than(value, MAX_DEPTH):
        raise BadFile("%s is JSON nested too deeply" % name)
    return value


def _no_constant(name: str) -> typing.NoReturn:
    raise ValueError("%s is not JSON" % name)


def _problem(name: str, exc: Exception) -> str | None:
    """The one line a failed open or read of a dataset's file `name` is reported as."""
    if isinstance(exc, FileNotFoundError):
        return None
    if isinstance(exc, BadFile):
        return str(exc)
    return "%s is unreadable (%s)" % (name, getattr(exc, "strerror", None) or exc)


# -- writing in a dataset folder ------------------------------------------------------------
#
# A file we create or append to must never be one somebody else put there: a symlink named
# run.lock or raw_responses.jsonl.torn.<ms> would make us write (or copy a torn line) into a
# file of theirs choosing, as us. So: O_NOFOLLOW always, O_EXCL for every new name, side
# files 0600, and folders that no one else can write in (`folder_problem`).

_WRITE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def open_own(path: str, flags: int, mode: int = 0o600) -> int:
    """os.open(path, flags, mode) that never follows a symlink and gives a regular file only
    (BadFile otherwise, one line). With O_CREAT|O_EXCL it makes a new file or fails."""
    try:
        fd = os.open(path, flags | _WRITE_FLAGS, mode)
    except OSError:
        if os.path.islink(path):
            raise BadFile("%s is a symlink, not a regular file" % path) from None
        raise
    st = os.fstat(fd)
    if not is_regular(st.st_mode):
        os.close(fd)
        raise BadFile("%s is %s, not a regular file" % (path, _kind(st.st_mode)))
    return fd


def open_log(path: str) -> int:
    """An fd appending to a log we own (created 0600): for a relaunch's output."""
    return open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)


def create_unique(stem: str) -> tuple[int, str]:
    """(fd, path) of a new 0600 file named `stem.PID.N`: O_EXCL, so a name planted in advance
    is skipped rather than followed. For temporary files beside their target."""
    for attempt in range(1000):
        path = "%s.%d.%d" % (stem, os.getpid(), attempt)
        try:
            return open_own(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), path
        except (FileExistsError, BadFile):
            continue
    raise BadFile("cannot make a temporary file beside %s: every name is taken" % stem)
