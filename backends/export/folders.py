"""Which dataset folders of an output folder `export`, `verify` and `report` take in.

Why a rule at all: an output folder is often shared (a sticky, world-writable `/data/out`),
and another user can make a folder there with a dataset's name and fill it with records of
their choosing. The engine already refuses to write in a folder that is not ours alone
(`watcher.folder_problem`: owned by someone else, writable by group or others, or a link
another user made); the readers apply the same rule, so another user's records never join
our training file or our figures unasked. What is left out is said in one line, with its
reason, and `--include-folder NAME` takes a folder in by name when it is meant.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from gen_tui.backends.untrusted import one_line
from gen_tui.backends.watcher import folder_problem, user_name

INCLUDE_FLAG = "--include-folder"


@dataclass(frozen=True)
class LeftOut:
    """A dataset folder not taken in, and why (short: it is said in a list)."""

    name: str
    why: str


def _owner(uid: int) -> str:
    name = user_name(uid)
    return f"uid {uid} ({name})" if name else f"uid {uid}"


def why_not_ours(folder: Path) -> str | None:
    """Why `folder` is not a dataset folder of ours alone, in a few words; None when it is.

    The decision is `folder_problem`'s, the engine's rule; the words are shorter than its,
    because several folders are named in one line.
    """
    path = os.fspath(folder)
    if folder_problem(path) is None:
        return None
    try:
        link = os.lstat(path)
        st = os.stat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    me = os.geteuid()
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (me, 0):
        return f"a link made by {_owner(link.st_uid)}"
    if st.st_uid != me:
        return f"owned by {_owner(st.st_uid)}"
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    who = "others" if st.st_mode & 0o002 else "its group"
    return f"writable by {who} (mode {st.st_mode & 0o7777:04o})"


def ours_only(folders: list[Path], include: Collection[str]) -> tuple[list[Path], list[LeftOut]]:
    """(`folders` that are ours alone or named in `include`, in order; those left out)."""
    kept: list[Path] = []
    left: list[LeftOut] = []
    for folder in folders:
        why = None if folder.name in include else why_not_ours(folder)
        if why is None:
            kept.append(folder)
        else:
            left.append(LeftOut(folder.name, why))
    return kept, left


def left_out_line(left: list[LeftOut], output_dir: Path) -> str:
    """The one line that says which folders were left out, why, and how to take one in."""
    names = "; ".join(f"{item.name} ({item.why})" for item in left)
    return one_line(
        f"gen-tui: left out {len(left)} folder{'s' if len(left) != 1 else ''} of "
        f"{output_dir} that another user could have written: {names}; "
        f"`{INCLUDE_FLAG} NAME` takes one in"
    )
