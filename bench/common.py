"""What every benchmark needs: a simulator process, prompts, a tokenizer, and a results table.

Benchmarks run the simulator in its own process so that the measured client's CPU time is
its own. Tables go to stdout and into BENCHMARKS.md between `<!-- bench:NAME -->` markers.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from platformdirs import user_cache_dir

from gen_tui.backends.demo import build_tokenizer, write_prompts

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "BENCHMARKS.md"
CACHE = Path(user_cache_dir("gen-tui")) / "bench"
"""Inputs made once and kept: the tokenizer, prompt files, record files to scan."""
SCRATCH = CACHE / "runs" / str(os.getpid())
"""What one bench process writes (the runs' output folders), removed when it exits: two
benches at once (CI's smoke run beside a full one) once shared `out-scale/direct-1`, and
the smoke run's clean start deleted the full run's folder under it."""
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
GEN_TUI = [sys.executable, "-m", "gen_tui.app.cli"]


def tokenizer() -> Path:
    return build_tokenizer(CACHE / "tokenizer")


def prompts(name: str, count: int) -> Path:
    path = CACHE / "prompts" / f"{name}-{count}" / f"{name}.jsonl"
    if not path.exists():
        write_prompts(path, count)
    return path


@contextlib.contextmanager
def simulator(*flags: str) -> Iterator[str]:
    """A `gen-tui sim` process on a free loopback port; yields its URL."""
    process = subprocess.Popen(
        [*GEN_TUI, "sim", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"simulator did not start: {line}{process.stderr.read()}")
        yield line.split("listening on", 1)[1].strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class Table:
    name: str
    title: str
    command: str
    columns: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(cell) for cell in cells])

    def markdown(self) -> str:
        lines = [
            f"### {self.title}",
            "",
            f"`{self.command}` on {machine()}, {time.strftime('%Y-%m-%d')}",
            "",
            "| " + " | ".join(self.columns) + " |",
            "| " + " | ".join("---" for _ in self.columns) + " |",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            lines += ["", *self.notes]
        return "\n".join(lines) + "\n"


def machine() -> str:
    cores = os.cpu_count()
    return f"{platform.machine()}, {cores} cores, Python {platform.python_version()}"


def publish(table: Table, write: bool) -> None:
    """Print the table; with `write`, replace its section of BENCHMARKS.md."""
    text = table.markdown()
    print(text)
    if not write:
        return
    start, end = f"<!-- bench:{table.name} -->", f"<!-- /bench:{table.name} -->"
    section = f"{start}\n{text}{end}"
    report = REPORT.read_text() if REPORT.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if pattern.search(report):
        report = pattern.sub(lambda _: section, report)
    else:
        report = report.rstrip("\n") + "\n\n" + section + "\n"
    REPORT.write_text(report)


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"
