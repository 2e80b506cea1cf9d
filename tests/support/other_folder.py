"""Another project's run on the same box: a real `gen-tui run` writing a folder the panel does
not watch, with budget flags of its own (issue 31, points 1 and 2).

It runs against a slow `gen-tui sim` process so that it stays alive for a whole test module:
one answer a second or so, thousands of prompts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.common import simulator
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.store.records import RAW_FILE
from tests.support.run_output import ENV, GEN_TUI


@dataclass(frozen=True)
class OtherRun:
    """The other project's run: its process, and the output folder it writes."""

    process: subprocess.Popen[str]
    out: Path
    datasets: tuple[str, ...]

    @property
    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def other_folder_run(
    root: Path, tokenizer: Path, vocab_size: int, datasets: tuple[str, ...], *flags: str
) -> Iterator[OtherRun]:
    """A `gen-tui run` of `datasets` writing `root/out` with `flags` (its budgets), up and
    writing each dataset when this yields; both processes killed after."""
    prompts = root / "prompts"
    for name in datasets:
        write_prompts(prompts / f"{name}.jsonl", 5000)
    out = root / "out"
    with simulator(
        "--tokens-per-s", "100", "--slots", "4", "--default-mean", "60",
        "--vocab-size", str(vocab_size),
    ) as url:  # fmt: skip
        run = subprocess.Popen(
            [*GEN_TUI, "run", "--prompts-dir", str(prompts), "--tokenizer", str(tokenizer),
             "--output-dir", str(out), "--server-url", url, "--plain", "--concurrency", "4",
             "--max-new-tokens", "256", *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, text=True,
            cwd=root, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while not all((out / name / RAW_FILE).is_file() for name in datasets):
                assert run.poll() is None, f"the other folder's run ended: {run.returncode}"
                assert time.monotonic() < deadline, "the other folder's run wrote nothing in 90 s"
                time.sleep(0.2)
            yield OtherRun(run, out, datasets)
        finally:
            if run.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.pid, signal.SIGKILL)
                run.wait(timeout=10)
