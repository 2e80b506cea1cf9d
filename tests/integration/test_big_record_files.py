"""`gen-tui verify` and `report` on record files of gigabytes (issue 30, point 10).

A record file copied in from elsewhere, or another user's, may be a sparse file of
gigabytes with no newline at all, or lines of a gigabyte each. Before, both commands held
up to twice the record bound while reading such a line: 547 MB of RSS and 20 s for 2 GB.
Real processes, their peak RSS read from the kernel (`wait4`); the bound is the README's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

GEN_TUI = str(Path(sys.executable).with_name("gen-tui"))
RSS_BOUND_MB = 200
"""The README's bound for verify and report, whatever the file's size or lines."""
SIZE = 2 << 30


LAUNCHER = """
import os, subprocess, sys
process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(process.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""
"""Starts the command from a small process of its own: a child's peak RSS counts what it
inherited at fork, and forked from pytest late in the suite that was pytest's own 500 MB."""


def peak_rss_mb(*args: str) -> tuple[int, float, str]:
    """(exit code, peak RSS in MB, stderr) of a real `gen-tui` process."""
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, GEN_TUI, *args], capture_output=True, text=True
    )
    code, peak_kb = done.stdout.split()
    return int(code), int(peak_kb) / 1024, done.stderr


def sparse(out: Path, newlines_every: int | None) -> Path:
    folder = out / "D1"
    folder.mkdir(parents=True)
    path = folder / "raw_responses.jsonl"
    with open(path, "wb") as handle:
        handle.truncate(SIZE)
        if newlines_every:
            for at in range(newlines_every - 1, SIZE, newlines_every):
                handle.seek(at)
                handle.write(b"\n")
    return path


@pytest.mark.parametrize("lines", ["no newline", "a newline every 512 MiB"])
@pytest.mark.parametrize("command", ["verify", "report"])
def test_a_gigabyte_file_costs_no_memory(tmp_path: Path, command: str, lines: str) -> None:
    every = None if lines == "no newline" else 512 << 20
    sparse(tmp_path / "out", every)
    code, rss, err = peak_rss_mb(command, "--output-dir", str(tmp_path / "out"))
    assert "Traceback" not in err
    assert rss < RSS_BOUND_MB, f"{command} peaked at {rss:.0f} MB on {lines}"
    count = 1 if every is None else SIZE // every
    assert err.count("bytes") >= count, err
    assert code == (1 if command == "verify" else 0), err
