"""The engine reads its servers' /metrics while it runs: the load reaches the snapshots and
progress.json, and a server without metrics is said once, with how to turn them on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.sim import LengthProfile
from gen_tui.backends.telemetry.metrics import ENABLE_HINT
from tests.support.engine import make_config, run
from tests.support.polling import wait_until


async def test_the_servers_load_reaches_snapshots_and_progress_json(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(slots=4, tokens_per_s=400.0, default_profile=LengthProfile(mean=100.0))
    output = tmp_path / "out"
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=60),
        output,
        [server.url],
        concurrency=8,
        metrics_interval_s=0.1,
    )
    snapshots: list[RunSnapshot] = []
    engine = Engine(config, on_snapshot=snapshots.append)
    task = asyncio.create_task(engine.run())
    try:

        def busy_progress() -> dict[str, Any] | None:
            path = output / "A" / "progress.json"
            try:
                data = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                return None
            metrics = data["servers"][server.url]["metrics"]
            return data if metrics and metrics["running"] == 4 else None

        data = await wait_until(busy_progress, timeout=30, what="a busy server in progress.json")
        assert data["version"] == 2
        entry = data["servers"][server.url]
        assert entry["state"] == "ok"
        metrics = entry["metrics"]
        assert metrics["queued"] == 4  # concurrency 8 against 4 slots
        assert 0 < metrics["kv_usage"] < 1
        assert metrics["gen_tok_s"] == 4 * 400.0
        assert metrics["retracted"] == 0
    finally:
        final = await task
    busy = [s.server_metrics[server.url] for s in snapshots if s.server_metrics.get(server.url)]
    assert any(m.running == 4 for m in busy if m is not None)
    assert final.server_metrics[server.url] is not None


async def test_a_server_without_metrics_is_said_once_with_the_flag(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(slots=2, tokens_per_s=2000.0, metrics="off")
    config = make_config(
        tokenizer_dir, prompts_dir(A=30), tmp_path / "out", [server.url], metrics_interval_s=0.05
    )
    final, events, _ = await run(config)
    said = [message for _, message in events if "/metrics" in message]
    assert said == [f"server {server.url} serves no /metrics: {ENABLE_HINT}"]
    assert "--enable-metrics" in said[0]
    assert final.server_metrics == {server.url: None}
    progress = orjson.loads((tmp_path / "out" / "A" / "progress.json").read_bytes())
    assert progress["servers"] == {server.url: {"state": "ok", "metrics": None}}
