"""Which folders a start takes code from, and which of them are refused (watcher/folders.py).

The check runs on the host right before the launch (the watcher's `--start`, or in-process
locally), on real folders: these tests make each layout an attacker could use, with real
owners and modes (another uid needs root to chown; those cases skip otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gen_tui.backends.watcher import code_folders, code_problem

OTHER_UID = 54321
"""A uid nobody on the box has: chown needs no account."""


def test_the_working_folder_each_script_folder_and_the_programs_folder() -> None:
    argv = ["/usr/bin/python3", "run_inference.py", "--x", "/opt/tools/hook.py", "--y", "z"]
    assert code_folders(argv, "/tmp/w", {}) == ["/tmp/w", "/usr/bin", "/opt/tools"]
    assert code_folders(["/v/bin/gen-tui", "run"], "/a", {}) == ["/a", "/v/bin"]
    assert code_folders(["/bin/bash", "/opt/jobs/go.sh"], "/a", {}) == ["/a", "/bin", "/opt/jobs"]
    assert code_folders(["python3", "../up/s.py"], "/a/b", {"PATH": "/nowhere"}) == [
        "/a/b",
        "/a/up",
    ]
    assert code_folders(["python3", "s.py"], None, {"PATH": "/nowhere"})[0] == os.getcwd()


def test_an_interpreters_script_whatever_its_name_ends_with() -> None:
    """`perl gen`, `bash -e ./launch`, `python3 -u /opt/x/run`: the first word that is not
    an option is the script; `-m`/`-c`/`-e` run code from a module or a word instead."""
    env = {"PATH": "/nowhere"}
    assert code_folders(["/usr/bin/perl", "/opt/jobs/gen", "-n", "4"], "/a", env) == [
        "/a",
        "/usr/bin",
        "/opt/jobs",
    ]
    assert code_folders(["bash", "-e", "../jobs/launch", "x"], "/a/b", env) == ["/a/b", "/a/jobs"]
    assert code_folders(["python3.11", "-u", "/opt/x/run", "/data/in"], "/a", env) == [
        "/a",
        "/opt/x",
    ]
    assert code_folders(["python3", "-m", "gen", "/opt/y/z"], "/a", env) == ["/a"]
    assert code_folders(["perl", "-e", "print 1", "/opt/y/z"], "/a", env) == ["/a"]
    assert code_folders(["/usr/bin/perl", "/opt/jobs/gen.pl"], "/a", env) == [
        "/a",
        "/usr/bin",
        "/opt/jobs",
    ]
    assert code_folders(["/opt/tool", "/data/prompts"], "/a", env) == ["/a", "/opt"]


def test_the_program_found_on_path_and_pythonpath_entries(tmp_path: Path) -> None:
    """A bare program is found on PATH as exec finds it (a relative entry against the
    working folder); PYTHONPATH entries count, relative ones against the working folder."""
    bin_dir = tmp_path / "w" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "tool").write_text("#!/bin/sh\n")
    (bin_dir / "tool").chmod(0o755)
    cwd = str(tmp_path / "w")
    env = {"PATH": "/nowhere:bin", "PYTHONPATH": "src::/opt/lib"}
    assert code_folders(["tool", "x"], cwd, env) == [cwd, str(bin_dir), f"{cwd}/src", "/opt/lib"]


def test_a_virtual_environments_site_packages(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert code_folders([str(venv / "bin" / "python")], "/", {}) == [
        "/",
        str(venv / "bin"),
        str(site),
    ]


def _layout(tmp_path: Path, mode: int, owner: int | None, above: bool) -> Path:
    """Our code folder `shared/code` with `shared` (above) or `code` itself at `mode`/`owner`."""
    shared = tmp_path / "shared"
    code = shared / "code"
    code.mkdir(parents=True, mode=0o755)
    shared.chmod(0o755)
    target = shared if above else code
    target.chmod(mode)
    if owner is not None:
        if os.geteuid() != 0:
            pytest.skip("needs root to give a folder to another uid")
        os.chown(target, owner, -1)
    return code


@pytest.mark.parametrize(
    ("mode", "owner", "above", "why"),
    [
        (0o1777, None, False, "{code} is writable by others (mode 1777, owner uid {me})"),
        (0o777, None, False, "{code} is writable by others (mode 0777"),
        (0o775, None, False, "{code} is writable by its group (mode 0775"),
        (0o755, OTHER_UID, False, "{code} is owned by uid 54321 (mode 0755), not by you"),
        (0o777, None, True, "{shared} is writable by others without the sticky bit (mode 0777"),
        (0o770, None, True, "{shared} is writable by its group without the sticky bit"),
        (0o755, OTHER_UID, True, "{shared} is owned by uid 54321 (mode 0755)"),
    ],
)
def test_a_code_folder_others_can_change_is_refused_in_one_line(
    tmp_path: Path, mode: int, owner: int | None, above: bool, why: str
) -> None:
    code = _layout(tmp_path, mode, owner, above)
    problem = code_problem([str(code)])
    assert problem is not None
    expected = why.format(code=code, shared=code.parent, me=os.geteuid())
    assert problem.startswith(f"refusing to start: {code} holds code the command would run, and ")
    assert expected in problem, problem
    assert "\n" not in problem


def test_sticky_above_ours_and_roots_pass(tmp_path: Path) -> None:
    code = _layout(tmp_path, 0o1777, None, above=True)
    assert code_problem([str(code), "/usr/bin", "/"]) is None


def test_a_link_another_user_made_to_our_code_is_refused(tmp_path: Path) -> None:
    """The script's folder named through a link someone else made (in a sticky folder):
    they can point it elsewhere after the check."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a link owned by another uid")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o1777)
    (tmp_path / "ours").mkdir(mode=0o755)
    link = shared / "code"
    link.symlink_to(tmp_path / "ours")
    os.lchown(link, OTHER_UID, -1)
    problem = code_problem([str(link)])
    assert problem is not None and f"{link} is a symlink made by uid 54321" in problem, problem


def test_a_folder_not_made_yet_is_as_safe_as_where_it_would_be_made(tmp_path: Path) -> None:
    """A PYTHONPATH entry that does not exist in a folder anyone may create names in: the
    other user makes it, with their modules."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    problem = code_problem([str(shared / "lib" / "py")])
    assert problem is not None and f"{shared} is writable by others (mode 1777" in problem
    shared.chmod(0o755)
    assert code_problem([str(shared / "lib" / "py")]) is None
