"""`precise` is a budget mode wherever a mode is named: the flag, the config file, and a
progress.json a watcher reads (an older reader takes the mode as text, never an error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gen_tui.app.cli.main import build_parser, engine_config
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.store.progress_file import ProgressFile


def test_the_flag_and_the_config_file_take_precise(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts" / "A.jsonl", 3)
    (tmp_path / "tok").mkdir()
    flags = ["run", "--server-url", "http://127.0.0.1:1", "--tokenizer", str(tmp_path / "tok")]
    flags += ["--prompts", str(tmp_path / "prompts")]
    args = build_parser().parse_args([*flags, "--budget-mode", "precise"])
    assert engine_config(args).budget_mode is BudgetMode.PRECISE
    path = tmp_path / "gen-tui.toml"
    path.write_text('[run]\nbudget_mode = "precise"\n')
    args = build_parser().parse_args([*flags, "--config", str(path)])
    assert engine_config(args).budget_mode is BudgetMode.PRECISE


def test_the_help_says_precise_may_stop_short(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{drain,predictive,strict,precise}" in text
    assert "precise: as near the budget as it can" in text
    assert "room left + mean answer >= the 95th percentile of the lengths seen" in text
    assert "stop short by up to that percentile less the mean" in text


def test_a_progress_file_of_a_precise_run_reads_its_mode() -> None:
    read = ProgressFile.parse({"state": "done", "budget_mode": "precise", "tokens": 9_997_348})
    assert read is not None and read.budget_mode == "precise" and not read.ignored
