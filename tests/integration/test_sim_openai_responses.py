"""The simulator's OpenAI-compatible /v1/chat/completions answers in the shapes OpenAI,
OpenRouter and `transformers serve` answer with: the completion object, every way a stream
ends (with and without usage), and usage with cost and OpenRouter's keepalive comments.

The OpenAI client and the cost meter are tested against these shapes."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest

from gen_tui.backends.sim import OPENAI_STREAM_ENDS, LengthProfile, SimConfig, SimServer
from tests.support.sim_http import (
    FAST,
    MESSAGES,
    PROMPT_TOKENS,
    TEN,
    chat,
    events_of,
    reconfigure,
    request,
    sse,
    stream_raw,
    usage_of,
)


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

        await reconfigure(sim, {"seed": 1})
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
