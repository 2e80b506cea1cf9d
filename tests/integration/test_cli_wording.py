"""What a real `gen-tui run` prints in a pipe (issue 31, defect 18): counts with their
thousands separated and their noun agreeing, `info:` as the one word for information, the
final status block once, and no advice to install nvidia-ml-py on a machine with no GPU."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.telemetry.nvml import nvidia_device_present
from tests.support.runs import finish, run_args, spawn


@pytest.fixture
async def piped_run(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> str:
    """The stdout of a short run of two datasets, one of a single prompt."""
    server = await sim(tokens_per_s=20000, slots=16)
    args = run_args(tokenizer_dir, prompts_dir(A=1, B=40), tmp_path / "out", server.url)
    code, stdout, stderr = await finish(await spawn(*args, "--max-tokens-per-dataset", "2000k"))
    assert code == 0, stderr
    return stdout


async def test_counts_agree_with_their_noun_and_info_is_one_word(piped_run: str) -> None:
    assert "1 sample," in piped_run or "1 sample\n" in piped_run, piped_run
    assert not re.search(r"\b1 samples\b", piped_run), piped_run
    assert "information:" not in piped_run
    # A count never gains a ".0"; a percentage keeps its one decimal ("27.0%").
    assert not re.search(r"\d\.0\b(?!%)", piped_run.split("summary:")[-1]), piped_run
    assert "2,000,000" in piped_run and "2,000,000.0" not in piped_run


async def test_the_final_status_block_is_printed_once(piped_run: str) -> None:
    blocks: list[list[str]] = [[]]
    for line in piped_run.splitlines():
        if " status: " in line:
            blocks[-1].append(line.split(" status: ", 1)[1])  # without its time
        elif blocks[-1]:
            blocks.append([])
    blocks = [block for block in blocks if block]
    assert blocks, piped_run
    assert len(blocks) == 1 or blocks[-1] != blocks[-2], piped_run


@pytest.mark.skipif(nvidia_device_present(), reason="this machine has an NVIDIA GPU")
async def test_no_advice_to_install_nvml_without_a_gpu(piped_run: str) -> None:
    assert "nvidia-ml-py" not in piped_run, piped_run
