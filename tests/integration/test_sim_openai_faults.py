"""The simulator's faults on /v1/chat/completions, shaped as hosted APIs send them: 402 for
no credits (the API only), 429 with Retry-After and X-RateLimit-Reset, 5xx, a hang, a reset,
torn JSON, and the error chunk in the middle of a stream."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import orjson
import pytest

from gen_tui.backends.sim import FAULT_KINDS, Faults, SimConfig, SimServer
from tests.support.sim_http import CHAT, FAST, TEN, chat, events_of, request, sse, stream_raw


def faulty(kind: str, **extra: Any) -> SimConfig:
    return SimConfig(tokens_per_s=FAST, profiles=TEN, faults=Faults(**{kind: 1.0}, **extra))


async def test_fault_402_is_only_for_the_api(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("payment_402")) as sim:
        status, answer = await chat(http, sim, request())
        assert (status, answer) == (
            402,
            {"error": {"message": "Insufficient credits", "code": 402}},
        )
        async with http.post(sim.url + "/generate", json={"text": "hi"}) as resp:
            assert resp.status == 200  # SGLang has no credits to run out of
        assert sim.stats.faults == {**dict.fromkeys(FAULT_KINDS, 0), "payment_402": 1}
        assert sim.stats.completed_rids and sim.stats.completed == 1


async def test_fault_429_carries_retry_after_and_ratelimit_reset(
    http: aiohttp.ClientSession,
) -> None:
    async with SimServer(faulty("rate_429", retry_after_s=2.0)) as sim:
        async with http.post(sim.url + CHAT, json=request()) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "2"
            reset_ms = int(resp.headers["X-RateLimit-Reset"])
            assert resp.headers["X-RateLimit-Remaining"] == "0"
            answer = orjson.loads(await resp.read())
        assert abs(reset_ms - (time.time() + 2.0) * 1000) < 5000
        assert answer["error"]["code"] == 429 and answer["error"]["message"]


async def test_faults_5xx_timeout_reset_torn(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("error_5xx")) as sim:
        status, answer = await chat(http, sim, request())
        assert status in (500, 503) and answer["error"]["code"] == status
    async with SimServer(faulty("timeout", hang_s=60.0)) as sim:
        with pytest.raises(TimeoutError):
            await chat(http, sim, request(), timeout=aiohttp.ClientTimeout(total=0.3))
    async with SimServer(faulty("reset")) as sim:
        with pytest.raises(aiohttp.ClientConnectionError):
            await chat(http, sim, request())
    async with SimServer(faulty("torn_json")) as sim:
        async with http.post(sim.url + CHAT, json=request()) as resp:
            assert resp.status == 200
            body = await resp.read()
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(body)
        raw = await stream_raw(http, sim, request(stream_options={"include_usage": True}), "T")
        *whole, torn = raw.split(b"\n\n")
        assert torn.startswith(b"data: {") and b"[DONE]" not in raw
        assert all(
            orjson.loads(event[6:])["choices"][0]["finish_reason"] is None for event in whole
        )
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(torn[len(b"data: ") :])
        assert (sim.stats.faults["torn_json"], sim.stats.completed) == (2, 0)


async def test_fault_error_in_the_middle_of_a_stream(http: aiohttp.ClientSession) -> None:
    async with SimServer(faulty("stream_error")) as sim:
        raw = await stream_raw(http, sim, request(stream_options={"include_usage": True}), "T")
        events = events_of(raw)
        assert b"[DONE]" not in raw
        *before, error = events
        assert error["choices"] == [
            {"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": "error"}
        ]
        assert error["error"]["code"] == 429 and error["error"]["message"]
        assert raw.endswith(sse(error))
        assert before[0]["choices"][0]["delta"]["role"] == "assistant"
        assert all(event["choices"][0]["finish_reason"] is None for event in before)
        text = "".join(event["choices"][0]["delta"]["content"] for event in before)
        assert 0 < len(text.split()) < 10  # cut half-way

        status, answer = await chat(http, sim, request(), "T")
        assert status == 500 and answer["error"]["code"] == 500
        assert (sim.stats.faults["stream_error"], sim.stats.completed) == (2, 0)
