"""The engine behind a real sglang-router reads each worker's /metrics (the router serves
none): per-worker numbers as each simulator's own /metrics gives them, the router as their
sum with its workers healthy, and a worker that goes down said so, in the snapshots and in
progress.json."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.sim import LengthProfile
from gen_tui.backends.telemetry.metrics import ServerMetrics, parse_metrics
from gen_tui.backends.telemetry.workers import WorkerLoad, healthy_count
from tests.support.engine import make_config
from tests.support.polling import wait_until

SLOW = {"tokens_per_s": 20.0, "default_profile": LengthProfile(mean=20_000, cv=0.01)}
"""Answers far longer than the test: every slot stays busy and every queue stays put."""


async def own_metrics(url: str) -> ServerMetrics:
    """What a simulator's own /metrics says, read directly."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as response:
        return parse_metrics(await response.text())


async def test_each_worker_is_read_and_the_router_is_their_sum(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, router: Any, tmp_path: Path
) -> None:
    small, large = await sim(slots=3, **SLOW), await sim(slots=5, **SLOW)
    url = await router(small.url, large.url)
    out = tmp_path / "out"
    # Round robin splits 12 in flight 6 and 6: the small one runs 3 and queues 3, the large
    # one runs 5 and queues 1.
    config = make_config(
        tokenizer_dir, prompts_dir(A=100), out, [url], concurrency=12, metrics_interval_s=0.1
    )
    snapshots: list[RunSnapshot] = []
    events: list[tuple[str, str]] = []
    engine = Engine(config, on_snapshot=snapshots.append, on_event=lambda *e: events.append(e))
    task = asyncio.create_task(engine.run())
    try:

        def workers() -> dict[str, WorkerLoad]:
            last = snapshots[-1] if snapshots else None
            return {w.url: w for w in (last.server_workers.get(url, ()) if last else ())}

        def settled() -> dict[str, WorkerLoad] | None:
            found = workers()
            loads = {u: (m.running, m.queued) for u, w in found.items() if (m := w.metrics)}
            return found if loads == {small.url: (3, 3), large.url: (5, 1)} else None

        seen = await wait_until(settled, timeout=60, what="both workers busy in a snapshot")
        for server in (small, large):
            own, read = await own_metrics(server.url), seen[server.url].metrics
            assert read is not None and read.server == "sglang"
            assert (read.running, read.queued, read.gen_tok_s) == (
                own.running,
                own.queued,
                own.gen_tok_s,
            )
            assert own.kv_usage is not None and read.kv_usage is not None
            assert abs(read.kv_usage - own.kv_usage) < 0.05  # it grows as they generate
        assert healthy_count(seen.values()) == 2
        total = snapshots[-1].server_metrics[url]
        assert total is not None and (total.running, total.queued) == (8, 4)
        assert total.gen_tok_s == 8 * SLOW["tokens_per_s"]

        def progress() -> dict[str, Any] | None:
            try:
                entry = orjson.loads((out / "A" / "progress.json").read_bytes())["servers"][url]
            except (OSError, orjson.JSONDecodeError, KeyError):
                return None
            running = {w["url"]: (w["metrics"] or {}).get("running") for w in entry["workers"]}
            return entry if running == {small.url: 3, large.url: 5} else None

        entry = await wait_until(progress, timeout=30, what="the workers in progress.json")
        assert entry["metrics"]["running"] == 8
        assert all(w["healthy"] is True and w["state"] == "ok" for w in entry["workers"])

        await large.stop()
        down = await wait_until(
            lambda: (w := workers().get(large.url)) is not None and w.state != "ok" and w,
            timeout=30,
            what="the stopped worker read as down",
        )
        assert down.state.startswith("down: cannot connect") and down.metrics is None
        assert healthy_count(workers().values()) == 1
        said = [m for _, m in events if f"router worker {large.url} is down" in m]
        assert len(said) == 1, events
    finally:
        engine.request_stop()
        engine.request_stop()  # the second signal aborts: no need to wait out the answers
        await asyncio.wait_for(task, 60)
