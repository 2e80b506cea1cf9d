"""The SGLang simulator fails on demand, one fault kind at a time, the ways real servers and
links do (5xx, 429 with Retry-After, a hang, a reset, torn JSON, an error mid-generation),
with a probability per request: the engine's retry and no-loss tests rest on these."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from gen_tui.backends.sim import FAULT_KINDS, Faults, SimConfig, SimServer
from tests.support.sim_http import FAST, generate, reconfigure, stream_events


def faulty(kind: str, **extra: Any) -> SimConfig:
    return SimConfig(tokens_per_s=FAST, faults=Faults(**{kind: 1.0}, **extra))


PROMPT = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 64, "ignore_eos": True}}


async def test_fault_5xx(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("error_5xx")) as sim:
        status, body = await generate(http, sim, PROMPT)
        assert status in (500, 503) and body["error"]["message"]
        assert sim.stats.faults["error_5xx"] == 1


async def test_fault_429_carries_retry_after(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("rate_429", retry_after_s=0.5)) as sim:
        async with http.post(sim.url + "/generate", json=PROMPT) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "0.5"
            assert orjson.loads(await resp.read())["error"]["message"]
        assert sim.stats.faults["rate_429"] == 1


async def test_fault_timeout_hangs_until_the_client_gives_up(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("timeout", hang_s=60.0)) as sim:
        with pytest.raises(TimeoutError):
            await generate(http, sim, PROMPT, timeout=aiohttp.ClientTimeout(total=0.3))
        assert sim.stats.faults["timeout"] == 1
        await reconfigure(sim, {"faults": {"timeout": 0.0, "hang_s": 0.05}})
        status, _ = await generate(http, sim, PROMPT)
        assert status == 200


async def test_fault_reset_drops_the_connection(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("reset")) as sim:
        with pytest.raises(aiohttp.ClientConnectionError):
            await generate(http, sim, PROMPT)
        assert sim.stats.faults["reset"] == 1


async def test_fault_torn_json(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("torn_json")) as sim:
        async with http.post(sim.url + "/generate", json=PROMPT) as resp:
            assert resp.status == 200
            body = await resp.read()
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(body)
        async with http.post(sim.url + "/generate", json={**PROMPT, "stream": True}) as resp:
            assert resp.status == 200
            raw = await resp.read()
        *whole, torn = raw.split(b"\n\n")
        assert whole and torn.startswith(b"data: {") and b"[DONE]" not in raw
        for event in whole:
            assert orjson.loads(event[len(b"data: ") :])["meta_info"]["finish_reason"] is None
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(torn[len(b"data: ") :])
        assert sim.stats.faults["torn_json"] == 2
        assert sim.stats.completed == 0


async def test_fault_error_in_the_middle_of_generation(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("stream_error")) as sim:
        events, _ = await stream_events(http, sim, PROMPT)
        assert events[-1] == b"[DONE]"
        assert events[-2]["error"]["message"]
        assert all(event["meta_info"]["finish_reason"] is None for event in events[:-2])
        status, body = await generate(http, sim, PROMPT)
        assert status == 500 and body["error"]["message"]
        assert sim.stats.faults["stream_error"] == 2


async def test_fault_probabilities_are_per_request(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST, faults=Faults(rate_429=0.5, retry_after_s=0))
    async with SimServer(config) as sim:
        statuses = [(await generate(http, sim, PROMPT))[0] for _ in range(100)]
    assert set(statuses) == {200, 429}
    assert 30 <= statuses.count(429) <= 70
    assert sim.stats.faults == {**dict.fromkeys(FAULT_KINDS, 0), "rate_429": statuses.count(429)}
