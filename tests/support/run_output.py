"""A finished real `gen-tui run` over the simulator, for the export and verify tests.

Made once per session (a run costs seconds of transformers import and tokenizing); tests
that damage or change it work on a copy (`copy_run`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import simulator
from gen_tui.backends.demo import write_prompts

GEN_TUI = [sys.executable, "-m", "gen_tui.app.cli"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
MAX_NEW_TOKENS = 300
"""Below the longest simulated answers (mean 120), so some records end at `length`."""


def gen_tui(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*GEN_TUI, *args], capture_output=True, env=ENV, timeout=110, input=stdin, check=False
    )


def make_run(root: Path, tokenizer: Path, vocab_size: int) -> tuple[Path, Path]:
    """(output dir, prompts dir) of a finished run: dataset A in `messages`, B in
    `conversations` layout, against a `gen-tui sim` process."""
    prompts = root / "prompts"
    write_prompts(prompts / "A.jsonl", 60, "messages")
    write_prompts(prompts / "B.jsonl", 40, "conversations")
    out = root / "out"
    with simulator(
        "--tokens-per-s", "1e6", "--vocab-size", str(vocab_size),
        "--profile", "A=120", "--profile", "B=120",
    ) as url:  # fmt: skip
        done = gen_tui(
            "run", "--prompts-dir", str(prompts), "--tokenizer", str(tokenizer),
            "--output-dir", str(out), "--server-url", url, "--plain",
            "--max-new-tokens", str(MAX_NEW_TOKENS),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return out, prompts


def copy_run(run: tuple[Path, Path], dest: Path) -> Path:
    """A copy of the run's output dir to damage (its manifests still name the run's
    prompt files and tokenizer)."""
    out = dest / "out"
    shutil.copytree(run[0], out)
    return out
