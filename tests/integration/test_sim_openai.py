"""The simulator's OpenAI-compatible `/v1/chat/completions`: the shapes OpenAI, OpenRouter and
`transformers serve` answer with (every stream ending, usage and cost, auth, credits, rate
limits, the mid-stream error chunk), on the same slots, completions and faults as /generate."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson
import pytest

from gen_tui.backends.sim import (
    FAULT_KINDS,
    OPENAI_STREAM_ENDS,
    Faults,
    LengthProfile,
    SimConfig,
    SimServer,
    main,
)

FAST = 1e7
CHAT = "/v1/chat/completions"
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Write a sorting function, please."},
]
PROMPT_TOKENS = 11  # words and punctuation of both messages
# cv 0: every completion of the dataset is exactly `mean` tokens long.
TEN = {"T": LengthProfile(mean=10, cv=0.0)}
LONG = {"L": LengthProfile(mean=1e6, cv=0.0)}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def request(**extra: Any) -> dict[str, Any]:
    return {"model": "sim-model", "messages": MESSAGES, "max_tokens": 100, **extra}


async def chat(
    http: aiohttp.ClientSession,
    sim: SimServer,
    body: dict[str, Any],
    dataset: str | None = None,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> tuple[int, Any]:
    headers = dict(headers or {})
    if dataset is not None:
        headers["X-Sim-Dataset"] = dataset
    async with http.post(sim.url + CHAT, json=body, headers=headers, **kwargs) as resp:
        return resp.status, orjson.loads(await resp.read())


async def stream_raw(
    http: aiohttp.ClientSession, sim: SimServer, body: dict[str, Any], dataset: str | None = None
) -> bytes:
    headers = {"X-Sim-Dataset": dataset} if dataset is not None else {}
    async with http.post(sim.url + CHAT, json={**body, "stream": True}, headers=headers) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        return await resp.read()


def events_of(raw: bytes) -> list[Any]:
    """The `data:` payloads of a stream, JSON decoded (`[DONE]` kept as bytes, comments skipped)."""
    events: list[Any] = []
    for block in raw.split(b"\n\n"):
        if not block or block.startswith(b":"):
            continue
        assert block.startswith(b"data: ")
        data = block[len(b"data: ") :]
        events.append(data if data == b"[DONE]" else orjson.loads(data))
    return events


def sse(payload: object) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def usage_of(prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        **extra,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


async def until(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


# ---- responses ----------------------------------------------------------------------------------


async def test_non_streaming_shape_and_deterministic_completion(
    http: aiohttp.ClientSession,
) -> None:
    profiles = {"B2": LengthProfile(mean=40)}
    async with SimServer(SimConfig(tokens_per_s=FAST, profiles=profiles)) as sim:
        status, first = await chat(http, sim, request(max_tokens=5000), "B2")
        assert status == 200
        assert set(first) == {"id", "object", "created", "model", "choices", "usage"}
        assert first["object"] == "chat.completion" and first["model"] == "sim-model"
        assert first["id"].startswith("chatcmpl-") and abs(first["created"] - time.time()) < 60
        [choice] = first["choices"]
        assert choice["index"] == 0 and choice["finish_reason"] == "stop"
        assert choice["message"]["role"] == "assistant"
        text = choice["message"]["content"]
        usage = first["usage"]
        completion = usage["completion_tokens"]
        assert usage == usage_of(PROMPT_TOKENS, completion)  # no cost: no price set
        assert completion == len(text.split()) >= 1
        assert sim.stats.completed_rids == ["oa/B2/" + first["id"].removeprefix("chatcmpl-")]
        assert (sim.stats.requests, sim.stats.completed) == (1, 1)
        assert sim.stats.total_completion_tokens == completion

        async def content(body: dict[str, Any], dataset: str | None = "B2") -> str:
            status, answer = await chat(http, sim, body, dataset)
            assert status == 200
            return answer["choices"][0]["message"]["content"]

        assert await content(request(max_tokens=5000, temperature=0.7, top_p=0.9)) == text
        parts = [{**MESSAGES[0]}, {"role": "user", "content": [{"type": "text", "text": "x"}]}]
        assert await content(request(messages=parts)) != text
        other = [MESSAGES[0], {"role": "user", "content": "Write a sorting function."}]
        assert await content(request(messages=other)) != text
        assert await content(request(max_tokens=5000), "C3") != text
        assert await content(request(max_tokens=5000), None) != text  # the default profile

        status, short = await chat(http, sim, request(max_completion_tokens=3), "B2")
        assert short["choices"][0]["finish_reason"] == "length"
        assert short["usage"]["completion_tokens"] == 3
        assert text.startswith(short["choices"][0]["message"]["content"] + " ")

        sim.configure({"seed": 1})
        assert await content(request(max_tokens=5000)) != text

    async with SimServer(SimConfig(tokens_per_s=FAST, profiles=profiles)) as restarted:
        _, again = await chat(http, restarted, request(max_tokens=5000), "B2")
        assert again["choices"][0]["message"]["content"] == text


@pytest.mark.parametrize("include_usage", [True, False])
@pytest.mark.parametrize("ending", OPENAI_STREAM_ENDS)
async def test_each_stream_ending(
    http: aiohttp.ClientSession, ending: str, include_usage: bool
) -> None:
    config = SimConfig(tokens_per_s=FAST, frame_tokens=4, profiles=TEN, openai_stream_end=ending)
    body = request(stream_options={"include_usage": include_usage})
    async with SimServer(config) as sim:
        _, whole = await chat(http, sim, body, "T")
        raw = await stream_raw(http, sim, body, "T")
        assert sim.stats.completed == 2
    events = events_of(raw)
    chunks = [event for event in events if isinstance(event, dict) and event.get("choices")]
    head = {key: chunks[0][key] for key in ("id", "object", "created", "model")}
    assert head["object"] == "chat.completion.chunk"
    assert all({key: chunk[key] for key in head} == head for chunk in chunks)
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    pieces = [delta["content"] for delta in deltas[1:]]
    assert len(pieces) == 3  # 10 tokens in frames of 4
    assert "".join(pieces) == whole["choices"][0]["message"]["content"]
    reasons = [chunk["choices"][0]["finish_reason"] for chunk in chunks]
    assert reasons == [None, None, None, "stop"]

    usage = usage_of(PROMPT_TOKENS, 10)
    last = {**head, "choices": [{"index": 0, "delta": {"content": pieces[-1]}}]}
    last["choices"][0].update(logprobs=None, finish_reason="stop")
    if not include_usage:
        assert not any("usage" in event for event in events if isinstance(event, dict))
        tail = sse(last) + (b"" if ending == "none" else b"data: [DONE]\n\n")
    elif ending == "done":  # OpenAI: "usage": null on every chunk but the usage chunk
        assert all(chunk["usage"] is None for chunk in chunks)
        last["usage"] = None
        tail = sse(last) + sse({**head, "choices": [], "usage": usage}) + b"data: [DONE]\n\n"
    elif ending == "none":  # transformers serve: usage on the last chunk, then nothing
        tail = sse({**last, "usage": usage})
    elif ending == "usage_with_choices":
        tail = sse({**last, "usage": usage}) + b"data: [DONE]\n\n"
    else:
        tail = sse(last) + sse({**head, "usage": usage}) + b"data: [DONE]\n\n"
    assert raw.endswith(tail)
    assert (b"[DONE]" in raw) == (ending != "none")


async def test_usage_cost_and_keepalive(http: aiohttp.ClientSession) -> None:
    config = SimConfig(
        tokens_per_s=FAST, profiles=TEN, cost_per_million=(2.0, 10.0), openai_keepalive=True
    )
    cost = (PROMPT_TOKENS * 2.0 + 10 * 10.0) / 1e6
    async with SimServer(config) as sim:
        _, body = await chat(http, sim, request(), "T")
        assert body["usage"] == usage_of(PROMPT_TOKENS, 10, cost=pytest.approx(cost))
        raw = await stream_raw(http, sim, request(stream_options={"include_usage": True}), "T")
        assert raw.startswith(b": OPENROUTER PROCESSING\n\ndata: {")
        assert events_of(raw)[-2]["usage"]["cost"] == pytest.approx(cost)
        _, short = await chat(http, sim, request(max_tokens=4), "T")
        assert short["usage"]["cost"] == pytest.approx((PROMPT_TOKENS * 2.0 + 4 * 10.0) / 1e6)
        assert sim.stats.total_cost == pytest.approx(2 * cost + short["usage"]["cost"])
        # The native /generate path is a local server: it bills nothing.
        async with http.post(sim.url + "/generate", json={"text": "hi", "rid": "T/1"}) as resp:
            assert resp.status == 200
        assert sim.stats.total_cost == pytest.approx(2 * cost + short["usage"]["cost"])


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
        sim.configure({"api_key": None})
        status, _ = await chat(http, sim, request())
        assert status == 200


# ---- faults -------------------------------------------------------------------------------------


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


# ---- capacity and disconnects -------------------------------------------------------------------


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
        await until(lambda: sim.stats.queued == 2)
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
        await until(lambda: sim.stats.in_flight == 1)
        task.cancel()
        await until(lambda: sim.stats.in_flight == 0)
        assert (sim.stats.aborted, sim.stats.disconnected) == (1, 1)

        headers = {"X-Sim-Dataset": "L"}
        async with http.post(sim.url + CHAT, json={**body, "stream": True}, headers=headers) as r:
            first = await asyncio.wait_for(r.content.readline(), 2.0)
            assert orjson.loads(first[len(b"data: ") :])["choices"][0]["delta"]["role"]
            assert sim.stats.in_flight == 1
            r.close()
        await until(lambda: sim.stats.in_flight == 0)
        assert (sim.stats.aborted, sim.stats.disconnected) == (2, 2)

        status, answer = await asyncio.wait_for(chat(http, sim, request(max_tokens=2), "L"), 1.0)
        assert status == 200 and answer["usage"]["completion_tokens"] == 2
        assert sim.stats.completed == 1


# ---- runtime config and command line ------------------------------------------------------------


async def test_sim_config_patch_of_the_api_fields(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST)
    async with SimServer(config) as sim:
        patch = {
            "openai_stream_end": "none",
            "cost_per_million": [1, 2.5],
            "model_name": "m",
            "strict_model": True,
            "openai_keepalive": True,
            "api_key": "sk-patched",
            "faults": {"payment_402": 0.5},
        }
        async with http.post(sim.url + "/_sim/config", json=patch) as resp:
            assert resp.status == 200
            shown = orjson.loads(await resp.read())
        assert shown["cost_per_million"] == [1.0, 2.5] and shown["api_key"] == "***"
        assert config.cost_per_million == (1.0, 2.5) and config.api_key == "sk-patched"
        assert (config.openai_stream_end, config.model_name, config.strict_model) == (
            "none",
            "m",
            True,
        )
        assert config.openai_keepalive and config.faults.payment_402 == 0.5

        for bad in (
            {"openai_stream_end": "eventually"},
            {"cost_per_million": [1]},
            {"cost_per_million": [1, -2]},
            {"strict_model": "yes"},
            {"api_key": ""},
            {"model_name": ""},
            {"faults": {"payment_402": 2}},
        ):
            async with http.post(sim.url + "/_sim/config", json=bad) as resp:
                assert resp.status == 400, bad
        assert config.openai_stream_end == "none" and config.cost_per_million == (1.0, 2.5)
        sim.configure({"cost_per_million": None, "api_key": None})
        assert config.cost_per_million is None and config.api_key is None


async def test_cli_serves_the_api(http: aiohttp.ClientSession) -> None:
    secret = "sk-cli-secret-42"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from gen_tui.backends.sim import main; raise SystemExit(main())",
        *("--port", "0", "--tokens-per-s", "1e7", "--profile", "T=10:0"),
        *("--api-key-env", "SIM_TEST_KEY", "--cost", "1,4", "--openai-stream-end", "none"),
        *("--model-name", "tiny", "--strict-model", "--fail-402", "0"),
        env={**os.environ, "SIM_TEST_KEY": secret},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 15.0)  # type: ignore[union-attr]
        url = line.decode().split()[-1]
        body = request(model="tiny", stream=True, stream_options={"include_usage": True})
        async with http.post(url + CHAT, json=body) as resp:
            assert resp.status == 401
        headers = {"Authorization": f"Bearer {secret}", "X-Sim-Dataset": "T"}
        async with http.post(url + CHAT, json=body, headers=headers) as resp:
            assert resp.status == 200
            raw = await resp.read()
        assert b"[DONE]" not in raw
        last = events_of(raw)[-1]
        assert last["choices"][0]["finish_reason"] == "stop"
        assert last["usage"]["cost"] == pytest.approx((PROMPT_TOKENS * 1 + 10 * 4) / 1e6)
        async with http.post(url + CHAT, json={**body, "model": "big"}, headers=headers) as resp:
            assert resp.status == 400
        async with http.get(url + "/_sim/config") as resp:
            assert secret.encode() not in await resp.read()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10.0) == 0
        assert b"Traceback" not in await proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize(
    "argv",
    [
        ["--cost", "1"],
        ["--cost", "a,b"],
        ["--cost", "1,-2"],
        ["--openai-stream-end", "eventually"],
        ["--fail-402", "2"],
        ["--api-key-env", "GEN_TUI_SIM_TEST_UNSET_VARIABLE"],
    ],
)
def test_cli_bad_api_flags_give_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEN_TUI_SIM_TEST_UNSET_VARIABLE", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gen-tui sim: error: ")
    assert captured.err.count("\n") == 1
