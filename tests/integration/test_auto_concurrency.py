"""`--concurrency auto` on the real engine against the simulator with a KV cache: it settles
near the number of requests the KV cache holds, from below and from above, and backs off
when the server retracts; `--concurrency auto` is a flag and a config value."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.config.run import EngineError
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.sim import LengthProfile
from tests.support.engine import make_config

MEAN = 400
PROMPT = 40
"""About a test prompt's tokens (a few dozen)."""
FIT = 40
"""Requests of a mean answer the KV cache holds: the naive count, which is not the knee."""
KV_TOKENS = FIT * (MEAN + PROMPT)
KNEE = KV_TOKENS / (MEAN * (1 + LengthProfile(MEAN).cv ** 2) + PROMPT)
"""Where the KV cache fills: a batch holds its answers to their ends, and the long ones stay
longest, so an answer in flight averages mean x (1 + cv^2) (BENCHMARKS.md's
concurrency_auto note): about 22 requests, not 40. The tuner settles at 21.8 to 23.4 here
alone (three runs) and at 20.0 beside a second test suite."""


async def _settle(
    sim: Callable[..., Any], tokenizer_dir: Path, prompts: Path, out: Path, start: int
) -> tuple[list[tuple[float, int]], Any]:
    server = await sim(
        slots=256,
        tokens_per_s=400.0,
        kv_tokens=KV_TOKENS,
        default_profile=LengthProfile(mean=MEAN),
    )
    config = make_config(
        tokenizer_dir, prompts, out, [server.url], concurrency="auto", auto_start=start,
        metrics_interval_s=0.25,
    )  # fmt: skip
    targets: list[tuple[float, int]] = []
    begin = time.monotonic()
    engine: Engine | None = None

    def snapshot(snap: RunSnapshot) -> None:
        now = time.monotonic() - begin
        targets.append((now, snap.concurrency))
        if now > 16 and engine is not None and not snap.stopping:
            engine.request_stop()
            engine.request_stop()

    engine = Engine(config, on_snapshot=snapshot)
    await asyncio.wait_for(engine.run(), 120)
    return targets, server


@pytest.mark.parametrize("start", [4, 100])
async def test_auto_settles_near_what_the_kv_cache_holds(
    sim: Callable[..., Any],
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    tmp_path: Path,
    start: int,
) -> None:
    targets, server = await _settle(sim, tokenizer_dir, prompts_dir(A=6000), tmp_path, start)
    # From above, what was sent before the first cut overfills the KV cache for seconds
    # (every admission meanwhile retracts): the tuner waits at its floor until it drains.
    late = [target for t, target in targets if t > 10]
    assert late, targets
    average = sum(late) / len(late)
    assert 0.7 * KNEE <= average <= 1.3 * KNEE, (average, KNEE, targets[::20])
    if start > FIT:  # from above: the first retractions cut it within seconds
        assert min(target for t, target in targets if t < 5) < 1.5 * FIT
    assert server.stats.retracted > 0  # it did find the limit by touching it


def test_auto_is_a_concurrency_and_nothing_else_is(tmp_path: Path) -> None:
    from gen_tui.backends.config.run import DatasetSpec, EngineConfig

    base = dict(datasets=[DatasetSpec("A", tmp_path / "A.jsonl")], output_dir=tmp_path)
    auto = EngineConfig(concurrency="auto", **base)  # type: ignore[arg-type]
    assert auto.auto_concurrency and auto.max_concurrency == 512
    fixed = EngineConfig(concurrency=150, **base)  # type: ignore[arg-type]
    assert not fixed.auto_concurrency and fixed.max_concurrency == 150
    with pytest.raises(EngineError, match="--concurrency"):
        EngineConfig(concurrency="automatic", **base)  # type: ignore[arg-type]


def test_the_flag_and_the_config_file_take_auto(tmp_path: Path) -> None:
    from gen_tui.app.cli.main import engine_config
    from gen_tui.app.cli.parser import build_parser

    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "A.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    common = ["run", "--prompts-dir", str(prompts), "--output-dir", str(tmp_path / "out")]
    common += ["--tokenizer", str(tmp_path)]  # (not loaded: the config is only built)
    args = build_parser().parse_args([*common, "--concurrency", "auto"])
    assert engine_config(args).concurrency == "auto"
    config = tmp_path / "gen-tui.toml"
    config.write_text('[run]\nconcurrency = "auto"\n')
    args = build_parser().parse_args([*common, "--config", str(config)])
    assert engine_config(args).auto_concurrency
    args = build_parser().parse_args([*common, "--concurrency", "10k"])
    assert engine_config(args).concurrency == 10_000
