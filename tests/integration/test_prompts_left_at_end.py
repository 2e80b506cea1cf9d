"""A run that stops at its budget long before its prompt file ends still says how many
prompts are left: the final snapshot and progress.json count the file, not the prefetch
queue the feed was holding when the run ended (the `r` preview and the panels read it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen_tui.backends.store.progress_file import ProgressFile
from tests.support.engine import make_config, run
from tests.support.records import read_records


async def test_a_run_ended_at_its_budget_counts_the_prompts_its_file_still_has(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    prompts = prompts_dir(A=600)
    out = tmp_path / "out"
    config = make_config(
        tokenizer_dir, prompts, out, [server.url], concurrency=8, budgets={"A": (None, 40)}
    )
    final, _, _ = await run(config)
    answered = len(read_records(out / "A"))
    assert answered >= 40
    snap = next(d for d in final.datasets if d.name == "A")
    assert snap.prompts_left == 600 - answered, "the file's lines less those answered"
    progress = ProgressFile.read(out / "A" / "progress.json")
    assert progress is not None and progress.prompts_left == 600 - answered
