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


def three_batches_args(tokenizer: Path, prompts: Path, out: Path) -> list[str]:
    """A run of 30,000 tokens in batches of 20 requests, three in flight; its URL is the
    placeholder "URL", set by `started_with_three_batches` once the simulator is up."""
    return batch_args(
        tokenizer, prompts, out, "URL", "--max-tokens-per-dataset", "30000",
        "--batch-max-requests", "20", "--batch-in-flight", "3",
    )  # fmt: skip


def with_url(args: list[str], url: str) -> list[str]:
    """`args` with the simulator's URL in place of "URL"."""
    return [url if arg == "URL" else arg for arg in args]


def slow_batches(url: str, delay_s: float) -> None:
    """The simulator's batches take `delay_s` to run, with no validating step."""
    sim_call(url, "/_sim/config", {"batch_delay_s": delay_s, "batch_validate_s": 0.0})


def instant_batches(key: str, **more: Any) -> dict[str, Any]:
    """The in-process simulator's options for batches that end as soon as they are polled
    (no validating, running or finalizing time), with `key` as its API key."""
    return {
        "api_key": key,
        "batch_delay_s": 0.0,
        "batch_validate_s": 0.0,
        "batch_finalize_s": 0.0,
        **more,
    }


async def wait_for_batches(
    process: Any, folder: Path, count: int = 3, timeout_s: float = 60.0
) -> None:
    """Until `folder`'s journal holds `count` batches with their ids (the run alive)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout_s
    while sum("batch" in line for line in journal_lines(folder)) < count:
        assert process.returncode is None and time.monotonic() < deadline, f"no {count} batches"
        await asyncio.sleep(0.05)
