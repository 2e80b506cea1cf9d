"""A FIFO in a prompt folder: a prompt file is read only when it is a regular file.

The attack (an attacker's pass on a fresh clone, issue 16): a prompt folder is often shared
(a team's datasets). Its files were checked with `is_file()` and then opened by name, by
the engine (line count, prompts), the manifest's sha256 and export/verify: a FIFO put in
place of a prompt file between the check and the open (or named by a run's manifest) made
the plain `open` wait for a writer for ever. Now every prompt file is opened without
waiting and checked on the open descriptor (`prompts.open_prompt_file`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.store.manifest import file_sha256
from gen_tui.backends.store.prompts import NotARegularFile, count_lines, iter_prompts
from tests.support.runs import finish, run_args, spawn


def within(seconds: float, call: Callable[[], Any], fifo: Path) -> BaseException | None:
    """What `call` raised, in a thread given `seconds`; a wait on `fifo` fails the test
    (after opening its other end, so the thread ends)."""
    raised: list[BaseException | None] = [None]

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            raised[0] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(writer)
        worker.join(5)
        pytest.fail(f"{call} waited on the FIFO")
    return raised[0]


@pytest.mark.parametrize(
    "read",
    [lambda p: list(iter_prompts(p)), count_lines, file_sha256],
    ids=["iter_prompts", "count_lines", "file_sha256"],
)
def test_every_reader_of_a_prompt_file_refuses_a_fifo_at_once(
    tmp_path: Path, read: Callable[[Path], Any]
) -> None:
    fifo = tmp_path / "B1.jsonl"
    os.mkfifo(fifo)
    raised = within(5, lambda: read(fifo), fifo)
    assert isinstance(raised, NotARegularFile), raised
    assert str(raised) == f"{fifo} is a FIFO, not a regular file"


async def test_a_run_names_a_fifo_prompt_file_in_one_line(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    prompts = prompts_dir(A=5)
    os.mkfifo(prompts / "B.jsonl")
    server = await sim()
    process = await spawn(*run_args(tokenizer_dir, prompts, tmp_path / "out", server.url))
    code, _, stderr = await finish(process)
    assert code == 1
    assert stderr == f"gen-tui: error: B: prompt file {prompts / 'B.jsonl'} is not a regular file\n"
