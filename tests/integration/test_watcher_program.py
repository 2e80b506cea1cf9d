"""The two ways the watcher runs as a program: its one-text source on the stdin of the oldest
Python a GPU box may have, and `python -m gen_tui.backends.watcher` from the package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gen_tui.backends import watcher
from tests.support.sshd import python38


def once(argv: list[str], tmp_path: Path, stdin: str | None = None) -> list[dict]:
    """The JSON lines of one `--once` watch of an empty output folder with dataset B1."""
    done = subprocess.run(
        [*argv, "--once", str(tmp_path), "B1"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.quick
def test_the_built_source_runs_help_and_once_under_the_oldest_python(tmp_path: Path) -> None:
    interpreter = python38()
    if interpreter is None:
        pytest.skip("no Python 3.8 interpreter on this machine")
    helped = subprocess.run(
        [interpreter, "-", "--help"],
        input=watcher.source(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: gen-tui-watcher")
    hello, dataset = once([interpreter, "-"], tmp_path, watcher.source())
    assert hello["type"] == "hello" and hello["python"].startswith("3.8.")
    assert (dataset["dataset"], dataset["exists"]) == ("B1", False)
    assert dataset["resume"] == "B1:0:0:0:0:0"


def test_python_m_runs_the_package(tmp_path: Path) -> None:
    hello, dataset = once([sys.executable, "-m", "gen_tui.backends.watcher"], tmp_path)
    assert hello["type"] == "hello" and hello["output_dir"] == str(tmp_path)
    assert (dataset["type"], dataset["dataset"], dataset["tokens"]) == ("dataset", "B1", 0)
