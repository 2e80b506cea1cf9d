"""The engine against servers that fail: faults retried with nothing lost or written twice,
client errors (4xx) not retried, load shared across servers with a dead one avoided, an
unreachable server one clear error, a server that goes away and comes back survived, and a
pool too small to keep the servers' batches full pointed out.

The engine in-process against the simulator on loopback, with a real tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends.config.run import EngineError
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.sim import Faults
from tests.support.engine import make_config, run
from tests.support.records import read_records, record_lines, recount


async def test_faults_are_retried_without_loss_or_duplicates(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    faults = Faults(
        error_5xx=0.1,
        rate_429=0.1,
        retry_after_s=0.05,
        reset=0.05,
        torn_json=0.1,
        timeout=0.03,
        hang_s=60,
    )
    server = await sim(faults=faults)
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=80),
        tmp_path / "out",
        [server.url],
        max_retries=20,
        request_timeout_s=1.0,
    )
    final, _, _ = await run(config)
    _tokens, records = recount(tmp_path / "out" / "A")
    assert records == 80
    assert final.datasets[0].errors == 0
    assert sum(server.stats.faults.values()) > 10
    written = {str(r["sample_id"]) for r in read_records(tmp_path / "out" / "A")}
    completed = {rid.split("/")[1] for rid in server.stats.completed_rids}
    assert written == completed


async def test_client_errors_are_not_retried(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(context_length=20)
    prompts = prompts_dir(A=5)
    config = make_config(tokenizer_dir, prompts, tmp_path / "out", [server.url])
    final, _, _ = await run(config)
    assert final.datasets[0].errors == 5
    assert server.stats.requests == 5
    errors = [
        orjson.loads(line)
        for line in (tmp_path / "out" / "A" / "errors.jsonl").read_bytes().splitlines()
    ]
    assert len(errors) == 5 and all(e["status"] == 400 for e in errors)
    assert recount(tmp_path / "out" / "A")[1] == 0


@pytest.mark.quick
async def test_several_servers_share_the_load_and_a_dead_one_is_survived(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    first = await sim(tokens_per_s=5000)
    second = await sim(tokens_per_s=5000)
    dead = "http://127.0.0.1:9"
    config = make_config(
        tokenizer_dir, prompts_dir(A=60), tmp_path / "out", [first.url, dead, second.url]
    )
    _final, events, _ = await run(config)
    assert recount(tmp_path / "out" / "A")[1] == 60
    assert first.stats.completed > 5 and second.stats.completed > 5
    assert first.stats.completed + second.stats.completed == 60
    assert any(dead in message for _, message in events)


async def test_unreachable_server_is_one_clear_error(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], tmp_path: Path
) -> None:
    config = make_config(tokenizer_dir, prompts_dir(A=3), tmp_path / "out", ["http://127.0.0.1:9"])
    with pytest.raises(EngineError, match="no inference server reachable"):
        await run(config)


async def test_a_server_that_goes_away_and_comes_back_does_not_end_the_run(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int, tmp_path: Path
) -> None:
    import asyncio

    from gen_tui.backends.sim import SimConfig, SimServer

    config_sim = SimConfig(tokens_per_s=2000, slots=16, vocab_size=vocab_size)
    server = SimServer(config_sim)
    await server.start()
    port = server.port
    completed_before = 0
    config = make_config(
        tokenizer_dir, prompts_dir(A=120), tmp_path / "out", [server.url], concurrency=16
    )
    events: list[tuple[str, str]] = []
    engine = Engine(config, on_event=lambda *e: events.append(e))
    run_task = asyncio.create_task(engine.run())
    try:
        while record_lines(tmp_path / "out" / "A") < 20:
            await asyncio.sleep(0.05)
        await server.stop()
        completed_before = server.stats.completed
        await asyncio.sleep(1.5)
        server = SimServer(config_sim, port=port)
        await server.start()
        final = await asyncio.wait_for(run_task, 60)
    finally:
        await server.stop()
    assert final.datasets[0].state is DatasetState.EXHAUSTED
    assert final.datasets[0].errors == 0
    assert recount(tmp_path / "out" / "A")[1] == 120
    assert completed_before + server.stats.completed >= 120
    assert any("retrying" in message for _, message in events)


async def test_a_dead_server_among_live_ones_is_avoided_not_retried_on_every_request(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """A server that resets every connection: requests move to the live one at once, and
    the dead one is tried less and less (its hold-off grows with its failure streak)."""
    import asyncio

    attempts = 0

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal attempts
        attempts += 1
        writer.transport.abort()

    dead = await asyncio.start_server(reset, "127.0.0.1", 0)
    dead_url = f"http://127.0.0.1:{dead.sockets[0].getsockname()[1]}"
    server = await sim(tokens_per_s=4000, slots=16)
    config = make_config(
        tokenizer_dir, prompts_dir(A=300), tmp_path / "out", [dead_url, server.url], concurrency=8
    )
    try:
        final, _, _ = await run(config)
    finally:
        dead.close()
    assert recount(tmp_path / "out" / "A")[1] == 300 and final.datasets[0].errors == 0
    assert 0 < attempts < 300 // 5, f"the dead server was tried {attempts} times for 300 samples"


async def test_a_pool_no_larger_than_the_servers_batch_is_pointed_out(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Two servers running 8 each: 16 in flight leaves no queue (said once, with a size that
    does), 24 keeps one (nothing said)."""
    servers = [await sim(slots=8), await sim(slots=8)]
    prompts = prompts_dir(A=20)
    said = []
    for concurrency in (16, 24):
        config = make_config(
            tokenizer_dir,
            prompts,
            tmp_path / f"out-{concurrency}",
            [s.url for s in servers],
            concurrency=concurrency,
        )
        _, events, _ = await run(config)
        said.append([text for _, text in events if "running batch" in text])
    assert len(said[0]) == 1, said
    assert "--concurrency 16 is not above" in said[0][0]
    assert "max_running_requests 16" in said[0][0] and "about 24 keeps a queue" in said[0][0]
    assert said[1] == []
