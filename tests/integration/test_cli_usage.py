"""A new user's mistakes on `gen-tui run`'s line (issue 31, defects 13 and 16): each is one
line on stderr and exit 2, said before any server is contacted, through the real entry point."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.runs import ENV, GEN_TUI

DEAD_URL = "http://127.0.0.1:9"
"""Nothing listens there: a run that got as far as a server would fail with exit 1."""


def gen_tui(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`gen-tui ARGS` to its end, output captured."""
    return subprocess.run(
        [*GEN_TUI, *args], capture_output=True, text=True, env=ENV, timeout=60, cwd=cwd
    )


def _refused(result: subprocess.CompletedProcess[str], *said: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith("gen-tui: error: "), lines
    for part in said:
        assert part in lines[0], lines
    assert "server" not in result.stdout
    return lines[0]


@pytest.fixture
def run_line(tokenizer_dir: Path, prompts_dir: Callable[..., Path], tmp_path: Path) -> list[str]:
    """A `gen-tui run` line complete but for the mistake under test."""
    return [
        "run",
        "--prompts-dir",
        str(prompts_dir(A=3)),
        "--tokenizer",
        str(tokenizer_dir),
        "--output-dir",
        str(tmp_path / "out"),
        "--server-url",
        DEAD_URL,
        "--plain",
    ]


def test_a_server_url_without_scheme_is_refused_in_one_line(run_line: list[str]) -> None:
    line = _refused(gen_tui(*run_line, "--server-url", "127.0.0.1:31555"), "http://127.0.0.1:31555")
    assert line.count("failed") == 0 and "scheme" in line


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--temperature", "-1", "--temperature must be at least 0"),
        ("--top-p", "7", "--top-p must be at most 1"),
        ("--top-p", "0", "--top-p must be more than 0"),
        ("--max-samples", "0", "--max-samples must be at least 1, got 0"),
        ("--max-tokens-per-dataset", "0", "--max-tokens-per-dataset must be at least 1, got 0"),
        ("--token-budget", "0", "--max-tokens-per-dataset must be at least 1, got 0"),
        ("--max-total-tokens", "0", "--max-total-tokens must be at least 1"),
    ],
)
def test_a_value_out_of_range_is_refused_with_exit_2(
    run_line: list[str], tmp_path: Path, flag: str, value: str, said: str
) -> None:
    _refused(gen_tui(*run_line, flag, value), said)
    assert not (tmp_path / "out").exists(), "the run started"


def test_a_missing_tokenizer_folder_is_refused_before_any_server(
    run_line: list[str], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-tokenizer"
    _refused(gen_tui(*run_line, "--tokenizer", str(missing)), "tokenizer", str(missing))


@pytest.mark.parametrize("value", ["-3", "0", "lots"])
def test_a_bad_concurrency_names_the_flag_once_and_mentions_auto(
    run_line: list[str], value: str
) -> None:
    line = _refused(gen_tui(*run_line, "--concurrency", value), "auto")
    assert line.count("--concurrency") == 1, line
    assert "argument" not in line


@pytest.mark.parametrize("value", ["-3", '"-3"', "0"])
def test_the_configs_bad_concurrency_mentions_auto(
    run_line: list[str], tmp_path: Path, value: str
) -> None:
    config = tmp_path / "gen-tui.toml"
    config.write_text(f"[run]\nconcurrency = {value}\n")
    _refused(gen_tui(*run_line, "--config", str(config)), "run.concurrency", "auto")
