"""What the simulator's /v1/chat/completions refuses, as hosted APIs do: malformed requests
(400), another model when strict, and a missing or wrong API key (401), with the key never
shown in an answer, a config listing or a repr."""

from __future__ import annotations

import aiohttp
import orjson

from gen_tui.backends.sim import SimConfig, SimServer
from tests.support.sim_http import CHAT, FAST, MESSAGES, chat, reconfigure, request


async def test_bad_requests_get_400(http: aiohttp.ClientSession) -> None:
    bad = [
        {"messages": []},
        {"messages": "hi"},
        {"messages": [{"content": "no role"}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
        {**request(), "max_tokens": 0},
        {**request(), "max_tokens": 40000},
        {**request(), "temperature": 5},
        {**request(), "stream": "yes"},
        {**request(), "stream_options": []},
        {**request(), "n": 2},
        {**request(), "model": 7},
    ]
    async with SimServer(SimConfig(tokens_per_s=FAST)) as sim:
        for body in bad:
            status, answer = await chat(http, sim, body)
            assert status == 400, body
            assert answer["error"]["code"] == 400 and answer["error"]["message"]
        async with http.post(sim.url + CHAT, data=b"{not json") as resp:
            assert resp.status == 400
        assert sim.stats.rejected == len(bad) + 1
        status, answer = await chat(http, sim, request(model="any/other-model"))
        assert status == 200 and answer["model"] == "any/other-model"
        status, answer = await chat(http, sim, {"messages": MESSAGES})
        assert status == 200 and answer["model"] == "sim-model"


async def test_strict_model_refuses_other_models(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST, model_name="tiny-llama", strict_model=True)
    async with SimServer(config) as sim:
        for body in (request(), {"messages": MESSAGES}):
            status, answer = await chat(http, sim, body)
            assert status == 400 and "tiny-llama" in answer["error"]["message"]
        status, answer = await chat(http, sim, request(model="tiny-llama"))
        assert status == 200 and answer["model"] == "tiny-llama"
        async with http.get(sim.url + "/v1/models") as resp:
            listing = orjson.loads(await resp.read())
        assert [model["id"] for model in listing["data"]] == ["tiny-llama"]


async def test_api_key_is_required_and_never_shown(http: aiohttp.ClientSession) -> None:
    secret = "sk-sim-0123456789"
    async with SimServer(SimConfig(tokens_per_s=FAST, api_key=secret)) as sim:
        for headers in ({}, {"Authorization": "Bearer sk-wrong"}, {"Authorization": secret}):
            status, answer = await chat(http, sim, request(), headers=headers)
            assert status == 401
            assert answer["error"]["code"] == 401 and answer["error"]["message"]
            assert "sk-" not in answer["error"]["message"]
        async with http.get(sim.url + "/v1/models") as resp:
            assert resp.status == 401
        good = {"Authorization": f"Bearer {secret}"}
        status, _ = await chat(http, sim, request(), headers=good)
        assert status == 200
        async with http.get(sim.url + "/v1/models", headers=good) as resp:
            assert resp.status == 200
        assert (sim.stats.unauthorized, sim.stats.completed) == (4, 1)
        for path in ("/_sim/config", "/get_server_info"):
            async with http.get(sim.url + path) as resp:
                shown = await resp.read()
            assert secret.encode() not in shown and b'"api_key":"***"' in shown
        assert secret not in repr(sim.config)
        await reconfigure(sim, {"api_key": None})
        status, _ = await chat(http, sim, request())
        assert status == 200


async def test_every_batch_route_asks_for_the_key_the_chat_route_does(
    http: aiohttp.ClientSession,
) -> None:
    secret = "sk-sim-batch-42"
    routes = [
        ("POST", "/v1/files"),
        ("GET", "/v1/files/file-x/content"),
        ("POST", "/v1/batches"),
        ("GET", "/v1/batches"),
        ("GET", "/v1/batches/batch_x"),
        ("POST", "/v1/batches/batch_x/cancel"),
    ]
    async with SimServer(SimConfig(tokens_per_s=FAST, api_key=secret)) as sim:
        for method, path in routes:
            async with http.request(method, sim.url + path) as resp:
                answer = orjson.loads(await resp.read())
            assert resp.status == 401, path
            assert answer["error"]["code"] == 401 and "sk-" not in answer["error"]["message"]
        good = {"Authorization": f"Bearer {secret}"}
        async with http.get(sim.url + "/v1/batches", headers=good) as resp:
            assert resp.status == 200 and orjson.loads(await resp.read())["data"] == []
        async with http.get(sim.url + "/v1/batches/batch_x", headers=good) as resp:
            assert resp.status == 404
        async with http.get(sim.url + "/_sim/batches") as resp:  # the tests' own view: no key
            assert resp.status == 200
