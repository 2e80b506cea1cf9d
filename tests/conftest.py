"""Shared fixtures: a real transformers tokenizer built offline, prompt files, the simulator."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from gen_tui.backends.demo import build_tokenizer, write_prompts
from gen_tui.backends.sim import SimConfig, SimServer

GEN_TUI = [sys.executable, "-m", "gen_tui.app.cli"]


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer(tmp_path_factory.mktemp("tokenizer") / "tok")


@pytest.fixture(scope="session")
def vocab_size(tokenizer_dir: Path) -> int:
    from gen_tui.backends.tokenizer import load_tokenizer

    return len(load_tokenizer(str(tokenizer_dir)))


@pytest.fixture
def prompts_dir(tmp_path: Path) -> Callable[..., Path]:
    """Write prompt files: prompts_dir(B1=100, B2=50) -> folder with B1.jsonl, B2.jsonl."""

    def make(**counts: int) -> Path:
        folder = tmp_path / "prompts"
        for name, count in counts.items():
            write_prompts(folder / f"{name}.jsonl", count)
        return folder

    return make


@pytest.fixture
async def sim(vocab_size: int) -> AsyncIterator[Callable[..., object]]:
    """Start simulators on loopback: `server = await sim(tokens_per_s=..., ...)`."""
    servers: list[SimServer] = []

    async def start(**overrides: object) -> SimServer:
        options: dict[str, object] = {"tokens_per_s": 1e7, "slots": 256, "vocab_size": vocab_size}
        options.update(overrides)
        server = SimServer(SimConfig(**options))  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture(scope="session")
def finished_run(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path, vocab_size: int
) -> tuple[Path, Path]:
    """(output dir, prompts dir) of one finished `gen-tui run` (see tests/run_output.py)."""
    from .run_output import make_run

    return make_run(tmp_path_factory.mktemp("finished_run"), tokenizer_dir, vocab_size)
