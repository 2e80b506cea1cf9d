"""Which folders a relaunch takes code from, and which of them are refused (resume.py)."""

from __future__ import annotations

import pytest

from gen_tui.backends.hosts import RunError
from gen_tui.backends.hosts.resume import (
    code_folders,
    refuse_unsafe_code_folders,
    with_ancestors,
)


def test_the_working_folder_each_script_folder_and_the_programs_folder() -> None:
    argv = ["/usr/bin/python3", "run_inference.py", "--x", "/opt/tools/hook.py", "--y", "z"]
    assert code_folders(argv, "/tmp/w") == ["/tmp/w", "/usr/bin", "/opt/tools"]
    assert code_folders(["/v/bin/gen-tui", "run"], None) == ["/v/bin"]
    assert code_folders(["python3", "../up/s.py"], "/a/b") == ["/a/b", "/a/up"]
    assert code_folders(["python3", "s.py"], None) == []  # the login folder: unknown here


@pytest.mark.parametrize(
    ("owner", "mode", "why"),
    [
        (1002, 0o755, "it belongs to uid 1002"),
        (0, 0o1777, "it is writable by others (mode 1777)"),
        (7, 0o775, "it is writable by its group (mode 0775)"),
    ],
)
def test_a_folder_others_may_write_in_is_refused_by_name(owner: int, mode: int, why: str) -> None:
    with pytest.raises(RunError) as refused:
        refuse_unsafe_code_folders({"/ok": (7, 0o755), "/w": (owner, mode)}, 7, ["/ok", "/w"])
    assert str(refused.value).startswith(f"refusing to relaunch from /w: {why}, so a module")


def test_our_folders_roots_and_unreadable_ones_pass() -> None:
    code = ["/a", "/usr/bin", "/gone"]
    refuse_unsafe_code_folders({"/a": (7, 0o700), "/usr/bin": (0, 0o755), "/gone": None}, 7, code)
    # above the code, a sticky folder others may write in keeps our entries ours
    refuse_unsafe_code_folders({"/tmp/w": (7, 0o755), "/tmp": (0, 0o1777)}, 7, ["/tmp/w"])


def test_every_folder_above_the_code_is_checked_once() -> None:
    assert with_ancestors(["/a/b/c", "/a/x"]) == ["/a/b/c", "/a/x", "/a/b", "/a", "/"]
    assert with_ancestors(["/"]) == ["/"]


@pytest.mark.parametrize(
    ("owner", "mode", "why"),
    [
        (1002, 0o755, "it belongs to uid 1002"),
        (0, 0o777, "it is writable by others without the sticky bit (mode 0777)"),
        (7, 0o775, "it is writable by its group without the sticky bit (mode 0775)"),
    ],
)
def test_a_folder_above_the_code_others_may_rename_in_is_refused(
    owner: int, mode: int, why: str
) -> None:
    """A code folder of ours under a folder others may write in (no sticky bit): they can
    rename ours away and put theirs at its path before the relaunch imports from it."""
    owners = {"/shared/me/code": (7, 0o755), "/shared/me": (7, 0o755), "/shared": (owner, mode)}
    with pytest.raises(RunError) as refused:
        refuse_unsafe_code_folders(owners, 7, ["/shared/me/code"])
    assert str(refused.value).startswith(
        f"refusing to relaunch: /shared, above the code it would run, {why}, so the code"
    )
