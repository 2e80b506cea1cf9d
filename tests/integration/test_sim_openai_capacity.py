"""The simulator's /v1/chat/completions shares the slots of /generate: requests beyond them
queue, and a client that hangs up (plain or streaming) frees its slot."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from gen_tui.backends.sim import SimConfig, SimServer
from tests.support.polling import wait_until
from tests.support.sim_http import CHAT, LONG, chat, events_of, request, stream_raw


async def test_requests_beyond_the_slots_queue(http: aiohttp.ClientSession) -> None:
    config = SimConfig(slots=2, tokens_per_s=200.0, profiles=LONG)
    body = request(max_tokens=100)  # 0.5 s a request

    async def one(stream: bool) -> None:
        if stream:
            raw = await stream_raw(http, sim, body, "L")
            assert events_of(raw)[-2]["choices"][0]["finish_reason"] == "length"
        else:
            status, answer = await chat(http, sim, body, "L")
            assert status == 200 and answer["usage"]["completion_tokens"] == 100

    async with SimServer(config) as sim:
        loop = asyncio.get_running_loop()
        started = loop.time()
        tasks = [asyncio.create_task(one(stream=i % 2 == 0)) for i in range(4)]
        await wait_until(lambda: sim.stats.queued == 2)
        assert sim.stats.in_flight == 2
        await asyncio.gather(*tasks)
        assert loop.time() - started >= 0.95
        assert sim.stats.max_in_flight == 2
        assert (sim.stats.in_flight, sim.stats.queued, sim.stats.completed) == (0, 0, 4)
        assert all(rid.startswith("oa/L/") for rid in sim.stats.completed_rids)


async def test_client_disconnect_frees_the_slot(http: aiohttp.ClientSession) -> None:
    config = SimConfig(slots=1, tokens_per_s=100.0, profiles=LONG)
    body = request(max_tokens=1000)
    async with SimServer(config) as sim:
        task = asyncio.create_task(chat(http, sim, body, "L"))
        await wait_until(lambda: sim.stats.in_flight == 1)
        task.cancel()
        await wait_until(lambda: sim.stats.in_flight == 0)
        assert (sim.stats.aborted, sim.stats.disconnected) == (1, 1)

        headers = {"X-Sim-Dataset": "L"}
        async with http.post(sim.url + CHAT, json={**body, "stream": True}, headers=headers) as r:
            first = await asyncio.wait_for(r.content.readline(), 2.0)
            assert orjson.loads(first[len(b"data: ") :])["choices"][0]["delta"]["role"]
            assert sim.stats.in_flight == 1
            r.close()
        await wait_until(lambda: sim.stats.in_flight == 0)
        assert (sim.stats.aborted, sim.stats.disconnected) == (2, 2)

        status, answer = await asyncio.wait_for(chat(http, sim, request(max_tokens=2), "L"), 1.0)
        assert status == 200 and answer["usage"]["completion_tokens"] == 2
        assert sim.stats.completed == 1
