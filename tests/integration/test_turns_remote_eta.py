"""A watched `--turns all` run's ETA (issue 35): `--max-samples` counts whole conversations,
so a panel watching the run on its host (hosts/watched.py, from the run's progress.json)
works the ETA out by conversations, as the run itself does, never by turn records: it
once counted the turns on disk against a limit of conversations and said a fraction of
the time left. The progress.json is a real `gen-tui run --turns all`'s, read mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bench.common import simulator
from gen_tui.backends.hosts import RunIdentity, RunProcess
from gen_tui.backends.hosts.watch import DatasetTotals
from gen_tui.backends.hosts.watched import watched_snapshot
from gen_tui.backends.store.progress_file import PROGRESS_FILE, ProgressFile
from tests.support.run_output import ENV, GEN_TUI
from tests.support.turns import TURN_MEAN, run_args, write_conversations

pytestmark = pytest.mark.timeout(180)

LIMIT = 60
"""Conversations the run stops at (`--max-samples`)."""


def _mid_run_progress(out: Path, prompts: Path, url: str, tokenizer: Path) -> dict[str, Any]:
    """The run's progress.json once some conversations are whole and answers flow (the
    run is killed then: what the test reads is the file as a panel would)."""
    args = [*run_args(prompts, out, url, tokenizer, 10**9), "--max-samples", str(LIMIT)]
    run = subprocess.Popen(
        [*GEN_TUI, *args], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    path = out / "chat" / PROGRESS_FILE
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                said = json.loads(path.read_bytes())
            except (OSError, ValueError):
                said = {}
            if (said.get("conversations") or 0) >= 2 and said.get("samples_s"):
                return dict(said)
            time.sleep(0.05)
        raise AssertionError(f"no conversation whole in {path} within 120 s")
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)


def test_a_watched_turns_all_run_has_its_own_eta_by_conversations(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    write_conversations(tmp_path / "prompts" / "chat.jsonl", 200)
    out = tmp_path / "out"
    with simulator(
        "--tokens-per-s", "300", "--vocab-size", str(vocab_size), "--slots", "16",
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        said = _mid_run_progress(out, tmp_path / "prompts", url, tokenizer_dir)
    progress = ProgressFile.parse(said)
    assert progress is not None and progress.pid is not None and not progress.ignored
    assert progress.conversations is not None and progress.turns_mean is not None
    assert 3 <= progress.turns_mean <= 8  # the conversations' 3 to 8 turns
    writer = RunProcess(
        RunIdentity("box", progress.pid, time.time(), "boot", ("gen-tui",)),
        ("chat",), "writing", 1.0, str(out), None,
    )  # fmt: skip
    totals = DatasetTotals(
        "chat", said["tokens"], said["samples"], True, 0, True, progress.pid, time.time(), 0,
        progress, True, time.time(),
    )  # fmt: skip
    rates = (said["tok_s"], said["samples_s"])
    shown = watched_snapshot(totals, writer, rates, (None, None), "box")
    assert shown.max_samples == LIMIT and shown.conversations == progress.conversations
    # The panel's ETA is the run's own (same counts, same rates)...
    assert shown.eta_s == pytest.approx(said["eta_s"])
    # ...which is the conversations still to finish at the mean turns, one answer each.
    left = (LIMIT - progress.conversations) * progress.turns_mean / said["samples_s"]
    assert shown.eta_s == pytest.approx(left)
    # Counting turn records against the limit said a fraction of that.
    by_turns = (LIMIT - said["samples"]) / said["samples_s"]
    assert shown.eta_s > 2 * by_turns, (shown.eta_s, by_turns)
