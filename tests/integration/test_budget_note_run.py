"""Issue 29, point 4, in real processes: a real `gen-tui run` against `gen-tui sim` with a
4,000-token budget at a 128-token cap on a pool of 128 says once that the budget is small
for the pool: one line of its log, the same words in progress.json while it runs and at its
end, and once on the panel that watches it through that file (the path of a panel watching
a run from another process: `watched_snapshot`, then the panel's `detail_parts`).

tests/unit/test_first_wave.py holds the engine's side (one event, in every snapshot);
tests/unit/test_progress_file.py the file's (escapes cleaned). This test fails if the note
is said twice in the log, is missing from progress.json, or shows twice (or never) on the
panel of a running dataset.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from bench.common import simulator
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.hosts.ps import RunIdentity, RunProcess
from gen_tui.backends.hosts.watch import DatasetTotals
from gen_tui.backends.hosts.watched import watched_snapshot
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.widgets.dataset_panel import PanelView, detail_parts
from tests.support.runs import ENV, GEN_TUI, run_args

pytestmark = pytest.mark.timeout(180)

BUDGET = 4000
CAP = 128
NOTE = "4,000 tokens is about 31 answers; 31 of 128 slots used"
"""What the engine says: 4,000 tokens at the prior of a 128 cap, of a pool of 128."""


def panel_lines(progress: ProgressFile, running: bool) -> str:
    """The details a panel shows for a dataset whose writer's progress.json is `progress`,
    while that writer runs (`running`) or after it ended."""
    totals = DatasetTotals(
        "A", 2000, 20, True, 0, running, progress.pid,
        None, 0, progress, True, time.time(),
    )  # fmt: skip
    writer = None
    if running:
        assert progress.pid is not None
        identity = RunIdentity("box", progress.pid, 0.0, "boot", ("gen-tui", "run"))
        writer = RunProcess(identity, ("A",), "writing", 1.0, "out", None, ("A",), True)
    shown = watched_snapshot(totals, writer, (0.0, 0.0), (BUDGET, None), "box")
    first, second = detail_parts(PanelView(snapshot=shown))
    return "\n".join((*first, *second))


def test_a_budget_small_for_the_pool_is_said_once_in_the_log_the_file_and_the_panel(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "A.jsonl", 400)
    out = tmp_path / "out"
    running: list[ProgressFile] = []
    # 100 tokens/s a slot: answers of about 100 tokens take about a second, so the run
    # lasts a few seconds and its progress.json is read while it is running.
    with simulator(
        "--slots", "128", "--tokens-per-s", "100", "--default-mean", "100",
        "--vocab-size", str(vocab_size), "--seed", "1",
    ) as url:  # fmt: skip
        args = run_args(tokenizer_dir, prompts, out, url)
        args[args.index("--max-new-tokens") + 1] = str(CAP)
        args += ["--max-tokens-per-dataset", str(BUDGET), "--concurrency", "128"]
        with subprocess.Popen(
            [*GEN_TUI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True
        ) as process:
            while process.poll() is None:
                read = ProgressFile.read(out / "A" / "progress.json")
                if read is not None and read.state is DatasetState.ACTIVE and read.budget_note:
                    running.append(read)
                time.sleep(0.05)
            stdout, stderr = process.communicate()
    assert process.returncode == 0, stderr[-2000:]
    said = [line for line in stdout.splitlines() if "budget small for the pool" in line]
    assert len(said) == 1, said
    assert said[0].endswith(f"A: budget small for the pool: {NOTE}"), said
    final = ProgressFile.read(out / "A" / "progress.json")
    assert final is not None and final.budget_note == NOTE
    assert running, "progress.json never read while the dataset ran with its note"
    assert {read.budget_note for read in running} == {NOTE}
    for read in running:
        assert panel_lines(read, True).count(NOTE) == 1, panel_lines(read, True)
    # Ended, the panel says "budget reached" and no longer why slots were idle.
    assert NOTE not in panel_lines(final, False)
