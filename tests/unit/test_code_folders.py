"""Which folders a relaunch takes code from, and which of them are refused (resume.py)."""

from __future__ import annotations

import pytest

from gen_tui.backends.hosts import RunError
from gen_tui.backends.hosts.resume import code_folders, refuse_unsafe_code_folders


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
        refuse_unsafe_code_folders({"/ok": (7, 0o755), "/w": (owner, mode)}, 7)
    assert str(refused.value).startswith(f"refusing to relaunch from /w: {why}, so a module")


def test_our_folders_roots_and_unreadable_ones_pass() -> None:
    refuse_unsafe_code_folders({"/a": (7, 0o700), "/usr/bin": (0, 0o755), "/gone": None}, 7)
