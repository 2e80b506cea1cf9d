"""The SGLang client behind a real sglang-router: it finds the workers, sums their capacity,
takes the smallest context, and sends an abort to every worker, because the router itself
answers /abort_request with 404 (sglang#6531)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from gen_tui.backends.clients import Request, SGLangClient
from gen_tui.backends.clients.results import Aborted
from gen_tui.backends.sim import LengthProfile
from tests.support.polling import wait_until


async def test_the_client_finds_the_workers_and_asks_them_what_the_router_cannot_say(
    sim: Any, router: Any
) -> None:
    small = await sim(slots=8, context_length=4096)
    large = await sim(slots=16, context_length=8192)
    url = await router(small.url, large.url)
    async with SGLangClient({"max_new_tokens": 16}) as client:
        workers = await client.workers(url)
        assert workers is not None
        assert {worker.url for worker in workers} == {small.url, large.url}
        assert all(worker.healthy for worker in workers)
        assert await client.workers(small.url) is None, "a server taken for a router"
        assert await client.capacity(url) == 8 + 16
        assert (await client.model_limits(url)).context_length == 4096
        assert await client.capacity(small.url) == 8


async def test_an_abort_through_the_router_reaches_the_worker_running_it(
    sim: Any, router: Any, vocab_size: int
) -> None:
    slow = {"tokens_per_s": 50, "profiles": {"A": LengthProfile(mean=5000, cv=0.01)}}
    first, second = await sim(**slow), await sim(**slow)
    url = await router(first.url, second.url)
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/abort_request", json={"rid": "A-0"}) as response,
    ):
        # Why the client fans out at all: were this ever 200, the router would forward it.
        assert response.status == 404
    async with SGLangClient({"max_new_tokens": 8000}) as client:
        request = Request("A-0", "A", [], input_ids=[1, 2, 3])
        answer = asyncio.ensure_future(client.generate(url, request))
        running = await wait_until(
            lambda: [s for s in (first, second) if s.stats.in_flight == 1],
            what="the request running on a worker",
        )
        await client.abort(url, "A-0")
        with pytest.raises(Aborted):
            await asyncio.wait_for(answer, 10)
    (holder,) = running
    assert holder.stats.aborted == 1 and holder.stats.disconnected == 0
    # Every worker was asked (the client cannot know which one holds a rid); the other
    # answered 200 for a rid it never had, as SGLang does.
    assert (first.stats.abort_requests, second.stats.abort_requests) == (1, 1)
    assert first.stats.completed == second.stats.completed == 0
