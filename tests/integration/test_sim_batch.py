"""The simulator's Batch contract driven by the official `openai` SDK (issue 33, step 1).

Our batch client is tested against the simulator; this holds the simulator to the SDK's idea
of the contract, so the two cannot drift into agreeing only with each other.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from openai import AsyncOpenAI

from gen_tui.backends.sim import SimServer

KEY = "sk-batch-test-0123"
PRICE = (1.0, 4.0)  # $/M in, out


def requests_file(count: int, tag: str = "p") -> bytes:
    lines = []
    for index in range(count):
        body = {
            "model": "sim-model",
            "messages": [{"role": "user", "content": f"question {tag} {index} about lists"}],
            "max_tokens": 64,
        }
        line = {"custom_id": f"{tag}-{index}", "method": "POST", "url": "/v1/chat/completions"}
        lines.append(orjson.dumps({**line, "body": body}))
    return b"\n".join(lines) + b"\n"


async def start(sim: Callable[..., Any], **batch: object) -> tuple[SimServer, AsyncOpenAI]:
    server: SimServer = await sim(api_key=KEY, cost_per_million=PRICE, **batch)
    return server, AsyncOpenAI(api_key=KEY, base_url=f"{server.url}/v1", max_retries=0)


async def submit(client: AsyncOpenAI, data: bytes) -> Any:
    upload = await client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    return await client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )


async def wait_settled(client: AsyncOpenAI, batch_id: str) -> tuple[Any, list[str]]:
    """Poll until the batch ends; the statuses seen on the way, in order."""
    seen: list[str] = []
    for _ in range(400):
        batch = await client.batches.retrieve(batch_id)
        if not seen or seen[-1] != batch.status:
            seen.append(batch.status)
        if batch.status in ("completed", "expired", "cancelled", "failed"):
            return batch, seen
        await asyncio.sleep(0.02)
    raise AssertionError(f"batch {batch_id} never ended: {seen}")


async def lines_of(client: AsyncOpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    content = await client.files.content(file_id)
    return [orjson.loads(line) for line in content.content.splitlines() if line.strip()]


async def ledger(server: SimServer) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{server.url}/_sim/batches") as response,
    ):
        result: dict[str, Any] = await response.json()
        return result


async def test_a_batch_goes_through_its_statuses_and_bills_half(sim: Callable[..., Any]) -> None:
    server, client = await start(sim, batch_delay_s=1.0, batch_validate_s=0.1)
    batch = await submit(client, requests_file(20))
    assert batch.status == "validating"
    assert batch.request_counts is not None and batch.request_counts.total == 20
    done, seen = await wait_settled(client, batch.id)
    assert seen[0] == "validating" and seen[-1] == "completed"
    assert "in_progress" in seen, seen
    order = ["validating", "in_progress", "finalizing", "completed"]
    assert [order.index(s) for s in seen] == sorted(order.index(s) for s in seen)
    assert done.request_counts.completed == 20 and done.request_counts.failed == 0
    assert done.error_file_id is None
    out = await lines_of(client, done.output_file_id)
    assert sorted(line["custom_id"] for line in out) == sorted(f"p-{i}" for i in range(20))
    for line in out:
        body = line["response"]["body"]
        assert line["response"]["status_code"] == 200 and line["error"] is None
        usage = body["usage"]
        live = (usage["prompt_tokens"] * PRICE[0] + usage["completion_tokens"] * PRICE[1]) / 1e6
        assert usage["cost"] == pytest.approx(live / 2)
        assert body["choices"][0]["message"]["content"]
    assert (await ledger(server))["ledger"] == {f"p-{i}": 1 for i in range(20)}
    await client.close()


async def test_an_expired_batch_keeps_what_it_finished(sim: Callable[..., Any]) -> None:
    # 40% of the delay fits the window: 4 of 10 lines finish, 6 expire.
    server, client = await start(sim, batch_delay_s=2.5, batch_validate_s=0.0, batch_window_s=1.0)
    batch = await submit(client, requests_file(10))
    done, _seen = await wait_settled(client, batch.id)
    assert done.status == "expired"
    assert (done.request_counts.completed, done.request_counts.failed) == (4, 6)
    out = await lines_of(client, done.output_file_id)
    errors = await lines_of(client, done.error_file_id)
    assert sorted(line["custom_id"] for line in out) == [f"p-{i}" for i in range(4)]
    assert sorted(line["custom_id"] for line in errors) == sorted(f"p-{i}" for i in range(4, 10))
    assert {line["error"]["code"] for line in errors} == {"batch_expired"}
    assert set((await ledger(server))["ledger"]) == {f"p-{i}" for i in range(4)}
    await client.close()


async def test_a_cancelled_batch_keeps_the_lines_done_before(sim: Callable[..., Any]) -> None:
    _server, client = await start(sim, batch_delay_s=60.0, batch_validate_s=0.0)
    batch = await submit(client, requests_file(10))
    await asyncio.sleep(0.1)
    cancelling = await client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling"
    done, _seen = await wait_settled(client, batch.id)
    assert done.status == "cancelled"
    errors = await lines_of(client, done.error_file_id)
    assert len(errors) == 10 - done.request_counts.completed
    assert {line["error"]["code"] for line in errors} == {"batch_cancelled"}
    await client.close()


async def test_partial_failure_goes_to_the_error_file(sim: Callable[..., Any]) -> None:
    _server, client = await start(sim, batch_delay_s=0.0, batch_fail_share=0.3)
    batch = await submit(client, requests_file(40))
    done, _seen = await wait_settled(client, batch.id)
    assert done.status == "completed"
    out = await lines_of(client, done.output_file_id)
    errors = await lines_of(client, done.error_file_id)
    assert out and errors
    assert len(out) + len(errors) == 40 == done.request_counts.total
    assert done.request_counts.failed == len(errors)
    assert {line["response"]["status_code"] for line in errors} == {500}
    await client.close()


async def test_a_bad_input_file_is_refused(sim: Callable[..., Any]) -> None:
    _server, client = await start(sim)
    with pytest.raises(openai.BadRequestError, match="not unique"):
        await submit(client, requests_file(2) + requests_file(1))
    await client.close()
