"""What `gen-tui --help`, `--version` and each command's `--help` show a new user (issue 31,
defect 17): a version, an example to copy at the end of every help, a line for every flag."""

from __future__ import annotations

import subprocess

import pytest

from gen_tui.backends.sim.cli import _build_parser
from tests.support.runs import ENV, GEN_TUI

COMMANDS = ["", "run", "sim", "export", "verify", "report", "alert"]


def gen_tui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GEN_TUI, *args], capture_output=True, text=True, env=ENV, timeout=60, check=False
    )


def test_version_says_the_installed_version() -> None:
    from importlib.metadata import version

    done = gen_tui("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"gen-tui {version('gen-tui')}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_ends_with_an_example(command: str) -> None:
    done = gen_tui(*filter(None, [command]), "--help")
    assert done.returncode == 0, done.stderr
    tail = done.stdout.rstrip().rsplit("\n\n", 1)[-1].splitlines()
    assert tail[0] in ("example:", "examples:"), done.stdout
    name = ["gen-tui", command] if command else ["gen-tui"]
    assert tail[1].split()[: len(name)] == name, tail


def test_every_sim_flag_says_what_it_does() -> None:
    bare = [
        action.option_strings
        for action in _build_parser()._actions
        if action.option_strings and not action.help
    ]
    assert bare == []
