"""Issue 31, defect 18, end to end in a real terminal: a headless `gen-tui run` to its end
printed its final status twice. The pipe's case is tests/integration/test_cli_wording.py;
here the run's output goes through a real pty (tmux), both ways a terminal shows it: the
live table (the default) and `--plain` lines. The whole scrollback is read once the run has
ended: the final figures appear in one block.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.support.polling import wait_until
from tests.support.runs import ENV, GEN_TUI

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

WIDTH, HEIGHT = 160, 48


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[list[str]]:
    """A tmux server of this test's own (its socket in tmp_path), killed at the end."""
    command = ["tmux", "-S", str(tmp_path / "tmux.sock")]
    yield command
    subprocess.run([*command, "kill-server"], capture_output=True)


async def run_in_a_terminal(
    tmux: list[str], args: list[str], tmp_path: Path, session: str = "run"
) -> str:
    """`gen-tui ARGS` in a 160x48 tmux pane (window `session`), to its end; the pane's
    whole scrollback."""
    env = " ".join(f"{key}={shlex.quote(ENV[key])}" for key in ("HF_HUB_OFFLINE", "PATH"))
    line = f"env {env} {shlex.join([*GEN_TUI, *args])}; echo EXIT=$?; sleep 120"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), line],
        check=True,
        cwd=tmp_path,
    )
    subprocess.run([*tmux, "set-option", "-t", session, "history-limit", "50000"], check=True)

    def scrollback() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", session],
            capture_output=True,
            text=True,
        ).stdout

    text = await wait_until(
        lambda: "EXIT=" in (text := scrollback()) and text, 120, "the run to end",
        interval=0.5, detail=lambda: scrollback()[-3000:],
    )  # fmt: skip
    assert "EXIT=0" in text, text
    return text


def args_for(tokenizer: Path, prompts: Path, out: Path, url: str, *extra: str) -> list[str]:
    return [
        "run", "--prompts-dir", str(prompts), "--tokenizer", str(tokenizer),
        "--output-dir", str(out), "--server-url", url, "--max-new-tokens", "512",
        "--max-tokens-per-dataset", "30k", *extra,
    ]  # fmt: skip


async def test_the_live_table_ends_once_in_a_terminal(
    tmux: list[str], tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The default display in a pty: the live table's final state once (its header line and
    each dataset's finished row), no plain status block beside it, then the summary."""
    server = await sim(tokens_per_s=3000, slots=16)
    args = args_for(tokenizer_dir, prompts_dir(A=400, B=400), tmp_path / "out", server.url)
    text = await run_in_a_terminal(tmux, args, tmp_path)
    headers = [line for line in text.splitlines() if re.match(r"\s*dataset\s+state\s", line)]
    assert len(headers) == 1, text
    for name in ("A", "B"):
        rows = [
            line
            for line in text.splitlines()
            if re.match(rf"\s*{name}\s+(budget reached|exhausted)", line)
        ]
        assert len(rows) == 1, text
    assert " status: " not in text, text
    # The old pool figure was "slots 153/160"; the small-budget note may still say "58 of
    # 64 slots used" (issue 29's words), which is not the pool figure.
    assert "in flight" in text and not re.search(r"\bslots \d", text), "point 7's words"
    assert len(re.findall(r"\bsummary\b", text)) == 1, text


def status_blocks(text: str) -> list[list[str]]:
    """The `status:` blocks of a plain log, each line without its time."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if " status: " in line:
            blocks[-1].append(line.split(" status: ", 1)[1])
        elif blocks[-1]:
            blocks.append([])
    return [block for block in blocks if block]


async def test_plain_lines_end_with_one_status_block_in_a_terminal(
    tmux: list[str], tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    """`--plain` in a pty: each status block differs from the one before it; the last says
    each dataset ended, once. Then the same command again over the finished folder: its
    first snapshot is already its last, so the periodic block and the final one would say
    the same (the doubled block, every time, before the fix)."""
    server = await sim(tokens_per_s=3000, slots=16)
    args = args_for(
        tokenizer_dir, prompts_dir(A=400, B=400), tmp_path / "out", server.url, "--plain"
    )
    for session in ("first", "again"):
        text = await run_in_a_terminal(tmux, args, tmp_path, session)
        blocks = status_blocks(text)
        assert blocks, text
        assert all(a != b for a, b in pairwise(blocks)), text
        for name in ("A", "B"):
            pattern = rf"{name} (budget reached|exhausted):"
            ended = [line for block in blocks for line in block if re.match(pattern, line)]
            assert len(ended) == 1, text
        assert len(re.findall(r"\bsummary:", text)) == 1, text
