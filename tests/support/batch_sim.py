"""A real `gen-tui sim` process for the batch lane's tests, its control calls, and the
`gen-tui run --api openai-batch` arguments they share."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from gen_tui.backends.store.batch_journal import JOURNAL_FILE
from tests.support.runs import ENV, GEN_TUI, run_args


@contextlib.contextmanager
def sim_process(vocab_size: int) -> Iterator[str]:
    """A `gen-tui sim` process (answers of mean 100 tokens); its URL."""
    sim = subprocess.Popen(
        [*GEN_TUI, "sim", "--port", "0", "--default-mean", "100", "--vocab-size",
         str(vocab_size), "--cost", "1,4"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        line = sim.stdout.readline()
        assert "listening on" in line, line
        yield line.split("listening on", 1)[1].strip()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sim.pid, signal.SIGKILL)
        sim.wait(timeout=10)


def sim_call(url: str, path: str, patch: dict[str, Any] | None = None) -> Any:
    """GET (or POST a config patch to) the simulator's control endpoints."""
    import urllib.request

    data = orjson.dumps(patch) if patch is not None else None
    request = urllib.request.Request(f"{url}{path}", data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=10) as response:
        return orjson.loads(response.read())


def batch_args(tokenizer: Path, prompts: Path, out: Path, url: str, *extra: str) -> list[str]:
    args = run_args(tokenizer, prompts, out, url, "--api", "openai-batch", "--model", "sim-model")
    args[args.index("--max-new-tokens") + 1] = "256"
    return [*args, "--batch-poll", "0.1", *extra]


def journal_lines(folder: Path) -> list[dict[str, Any]]:
    path = folder / JOURNAL_FILE
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.endswith(b"}")]
