"""Real `gen-tui sim` processes as the lanes of a mixed fleet (issue 34's tests), and the
records a run over them wrote."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from tests.support.run_output import ENV, GEN_TUI

LENGTHS = ("--default-mean", "50", "--default-cv", "0.3")
"""Every lane's answers: a mean of 50 tokens, a little spread."""


@contextmanager
def sim(vocab_size: int, *flags: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A `gen-tui sim` process with `flags`: its URL and the process (to kill it)."""
    process = subprocess.Popen(
        [*GEN_TUI, "sim", "--port", "0", "--vocab-size", str(vocab_size), *LENGTHS, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening on" in line, line
        yield line.split("listening on", 1)[1].strip(), process
    finally:
        process.terminate()
        process.wait(timeout=10)


def records(folder: Path) -> list[dict[str, Any]]:
    """Every record of one dataset folder."""
    raw = (folder / "raw_responses.jsonl").read_bytes()
    return [orjson.loads(line) for line in raw.splitlines()]


def until_first_plan(run: subprocess.Popen[str]) -> list[str]:
    """The run's output lines up to its first plan line (said once every lane answered)."""
    assert run.stdout is not None
    lines = []
    for line in run.stdout:
        lines.append(line)
        if "info: plan: " in line:
            break
    return lines
