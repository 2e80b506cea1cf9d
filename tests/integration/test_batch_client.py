"""Our batch client against the simulator's Batch contract (issue 33, step 2)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from gen_tui.backends.clients.batch import BatchClient, BatchState
from gen_tui.backends.clients.results import RequestFailed

KEY = "sk-client-test-4567"


def client(key: str = KEY) -> BatchClient:
    return BatchClient(
        {"temperature": 0.7}, model="sim-model", api_key=key, key_hint="GEN_TUI_TEST_KEY"
    )


async def settle(batches: BatchClient, url: str, batch_id: str) -> BatchState:
    for _ in range(500):
        state = await batches.retrieve(url, batch_id)
        if state.ended:
            return state
        await asyncio.sleep(0.02)
    raise AssertionError("the batch never ended")


async def test_upload_create_poll_download(sim: Callable[..., Any]) -> None:
    server = await sim(api_key=KEY, batch_delay_s=0.3, batch_fail_share=0.2)
    ids = [f"s{i}" for i in range(30)]
    async with client() as batches:
        data = b"".join(
            batches.request_line(i, [{"role": "user", "content": f"list {i}"}], 50) for i in ids
        )
        file_id = await batches.upload(server.url, data)
        created = await batches.create(server.url, file_id, {"gen_tui_wave": "w1"})
        assert created.status == "validating" and created.total == 30
        found = await batches.find(server.url, "gen_tui_wave", "w1")
        assert found is not None and found.id == created.id
        assert await batches.find(server.url, "gen_tui_wave", "w2") is None
        state = await settle(batches, server.url, created.id)
        assert state.status == "completed"
        lines = await batches.results(server.url, state, set(ids), 50 << 20)
    assert set(lines.answers) | set(lines.failures) == set(ids)
    assert lines.failures and lines.answers and not lines.problems
    assert all(0 < g.completion_tokens <= 50 for g in lines.answers.values())
    assert server.stats.total_completion_tokens == sum(
        g.completion_tokens for g in lines.answers.values()
    )


async def test_cancel_and_a_bad_key(sim: Callable[..., Any]) -> None:
    server = await sim(api_key=KEY, batch_delay_s=60.0)
    async with client() as batches:
        file_id = await batches.upload(
            server.url, batches.request_line("a", [{"role": "user", "content": "x"}], 10)
        )
        created = await batches.create(server.url, file_id, {})
        assert (await batches.cancel(server.url, created.id)).status == "cancelling"
        state = await settle(batches, server.url, created.id)
        assert state.status == "cancelled"
        lines = await batches.results(server.url, state, {"a"}, 1 << 20)
        assert "batch_cancelled" in lines.failures["a"]
    async with client("sk-wrong-key-999") as wrong:
        with pytest.raises(RequestFailed) as caught:
            await wrong.upload(server.url, b"{}\n")
    assert caught.value.kind == RequestFailed.AUTH
    assert "GEN_TUI_TEST_KEY" in caught.value.reason
    assert "sk-wrong-key-999" not in caught.value.reason


async def test_a_download_past_its_bound_is_refused(sim: Callable[..., Any]) -> None:
    server = await sim(api_key=KEY, batch_delay_s=0.0, batch_finalize_s=0.0)
    async with client() as batches:
        lines = b"".join(
            batches.request_line(f"s{i}", [{"role": "user", "content": "x"}], 200)
            for i in range(20)
        )
        created = await batches.create(server.url, await batches.upload(server.url, lines), {})
        state = await settle(batches, server.url, created.id)
        with pytest.raises(RequestFailed, match="over"):
            await batches.results(server.url, state, {f"s{i}" for i in range(20)}, 1000)
