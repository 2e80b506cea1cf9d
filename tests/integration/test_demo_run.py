"""`gen-tui run --demo` is an ordinary run over the demo's own files: its flags are honoured
or refused, and a second launch (what `r` does) resumes the output, never deletes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.records import recount


def _demo(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "gen_tui.app.cli", "run", "--demo", "--plain", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--server-url", "http://x"], "--server-url"),
        (["--tokenizer", "t", "--prompts-dir", "p"], "--prompts-dir, --tokenizer"),
        (["--config", "c.toml"], "--config"),
    ],
)
def test_flags_the_demo_cannot_honour_are_refused(
    tmp_path: Path, flags: list[str], named: str
) -> None:
    done = _demo(tmp_path, *flags)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"gen-tui: error: --demo brings its own prompts, server and tokenizer: drop {named}"
    )


def test_demo_honours_datasets_and_budget_and_resumes_without_deleting(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _demo(
        tmp_path,
        "--datasets",
        "B1_glaive",
        "--max-tokens-per-dataset",
        "20k",
        "--output-dir",
        str(out),
    )
    assert first.returncode == 0, first.stderr[-2000:]
    assert [path.name for path in out.iterdir()] == ["B1_glaive"]
    tokens, records = recount(out / "B1_glaive")
    assert 20_000 <= tokens < 40_000 and records > 0
    before = (out / "B1_glaive" / "raw_responses.jsonl").read_bytes()
    # The demo's answers are ids of the demo's tokenizer: its output passes the full check.
    checked = subprocess.run(
        [sys.executable, "-m", "gen_tui.app.cli", "verify", "--output-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    again = _demo(
        tmp_path,
        "--datasets",
        "B1_glaive",
        "--max-tokens-per-dataset",
        "60k",
        "--output-dir",
        str(out),
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming what is there" in again.stdout
    after = (out / "B1_glaive" / "raw_responses.jsonl").read_bytes()
    assert after.startswith(before) and len(after) > len(before)
    tokens, more = recount(out / "B1_glaive")
    assert tokens >= 60_000 and more > records
    assert [path.name for path in out.iterdir()] == ["B1_glaive"]


def test_a_bad_dataset_name_with_demo_is_a_usage_error(tmp_path: Path) -> None:
    done = _demo(tmp_path, "--datasets", "NOPE", "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "NOPE" in done.stderr
    assert not (tmp_path / "out").exists()
