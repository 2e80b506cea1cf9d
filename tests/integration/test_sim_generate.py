"""The SGLang simulator's /generate answers like a real SGLang 0.5.x server: the response
shape and meta_info, completions that depend only on the prompt and the dataset (so a retry or
a restarted server gives the same one), cumulative and incremental streams, and batches.

Every other test and the benchmarks trust the simulator to speak SGLang's protocol."""

from __future__ import annotations

import time

import aiohttp
import pytest

from gen_tui.backends.sim import LengthProfile, SimConfig, SimServer
from tests.support.sim_http import FAST, generate, reconfigure, stream_events

META_KEYS = {
    "id",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "e2e_latency",
    "weight_version",
    "num_retractions",
    "reasoning_tokens",
    "dp_rank",
}


@pytest.mark.quick
async def test_non_streaming_shape_and_deterministic_completion(
    http: aiohttp.ClientSession,
) -> None:
    config = SimConfig(tokens_per_s=FAST, profiles={"B2": LengthProfile(mean=300)})
    payload = {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 5000}}
    async with SimServer(config) as sim:
        sent = time.monotonic()
        status, first = await generate(http, sim, {**payload, "rid": "B2/s1/a"})
        took = time.monotonic() - sent
        assert status == 200
        assert set(first) == {"text", "output_ids", "meta_info"}
        meta = first["meta_info"]
        assert set(meta) >= META_KEYS
        assert meta["id"] == "B2/s1/a"
        assert meta["finish_reason"] == {"type": "stop", "matched": 2}
        assert meta["prompt_tokens"] == 3
        assert meta["completion_tokens"] == len(first["output_ids"]) >= 1
        assert (meta["cached_tokens"], meta["num_retractions"], meta["dp_rank"]) == (0, 0, None)
        assert meta["weight_version"] == "default"
        # The server's own time for the request: real (not a placeholder 0) and within ours.
        assert isinstance(meta["e2e_latency"], float) and 0 < meta["e2e_latency"] <= took
        assert all(3 <= token < 32000 for token in first["output_ids"])
        assert len(first["text"].split()) == meta["completion_tokens"]

        _, retry = await generate(http, sim, {**payload, "rid": "B2/s1/retry"})
        assert retry["output_ids"] == first["output_ids"]
        assert retry["text"] == first["text"]
        _, other = await generate(http, sim, {**payload, "input_ids": [5, 6, 8], "rid": "B2/s2/a"})
        assert other["output_ids"] != first["output_ids"]
        _, other_dataset = await generate(http, sim, {**payload, "rid": "C3/s1/a"})
        assert other_dataset["output_ids"] != first["output_ids"]
        await reconfigure(sim, {"seed": 1})
        _, reseeded = await generate(http, sim, {**payload, "rid": "B2/s1/a"})
        assert reseeded["output_ids"] != first["output_ids"]

    async with SimServer(SimConfig(tokens_per_s=FAST, profiles=config.profiles)) as restarted:
        _, resumed = await generate(http, restarted, {**payload, "rid": "B2/s1/later"})
        assert resumed["output_ids"] == first["output_ids"]


async def test_text_prompt_and_vocab_size(http: aiohttp.ClientSession) -> None:
    async with SimServer(SimConfig(tokens_per_s=FAST, vocab_size=100)) as sim:
        status, body = await generate(http, sim, {"text": "Write a sorting function, please."})
        assert status == 200
        assert body["meta_info"]["prompt_tokens"] == 7  # words and punctuation
        assert all(3 <= token < 100 for token in body["output_ids"])
        assert len(body["meta_info"]["id"]) == 32


@pytest.mark.quick
async def test_stream_frames_are_cumulative(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST, frame_tokens=4, default_profile=LengthProfile(mean=40))
    payload = {"input_ids": [9, 9, 9], "rid": "S/1/a", "sampling_params": {"max_new_tokens": 500}}
    async with SimServer(config) as sim:
        _, whole = await generate(http, sim, payload)
        sent = time.monotonic()
        events, raw = await stream_events(http, sim, payload)
        took = time.monotonic() - sent
    assert raw.endswith(b"data: [DONE]\n\n")
    assert events[-1] == b"[DONE]"
    frames = events[:-1]
    assert len(frames) >= 2
    previous: list[int] = []
    for frame in frames[:-1]:
        assert frame["meta_info"]["finish_reason"] is None
        assert "e2e_latency" not in frame["meta_info"]
    for frame in frames:
        ids = frame["output_ids"]
        assert ids[: len(previous)] == previous
        assert 0 < len(ids) - len(previous) <= 4
        assert frame["meta_info"]["completion_tokens"] == len(ids)
        assert len(frame["text"].split()) == len(ids)
        previous = ids
    last = frames[-1]
    assert last["meta_info"]["finish_reason"] == whole["meta_info"]["finish_reason"]
    assert 0 < last["meta_info"]["e2e_latency"] <= took
    assert last["output_ids"] == whole["output_ids"]
    assert last["text"] == whole["text"]


async def test_stream_output_frames_are_incremental(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST, stream_output=True, frame_tokens=3)
    payload = {"text": "hello there", "rid": "S/2/a", "sampling_params": {"max_new_tokens": 50}}
    async with SimServer(config) as sim:
        _, whole = await generate(http, sim, payload)
        events, _ = await stream_events(http, sim, payload)
    frames = events[:-1]
    assert events[-1] == b"[DONE]"
    assert all(1 <= len(frame["output_ids"]) <= 3 for frame in frames)
    assert [token for frame in frames for token in frame["output_ids"]] == whole["output_ids"]
    assert "".join(frame["text"] for frame in frames) == whole["text"]
    counts = [frame["meta_info"]["completion_tokens"] for frame in frames]
    assert counts == sorted(counts) and counts[-1] == len(whole["output_ids"])
    reasons = [frame["meta_info"]["finish_reason"] for frame in frames]
    assert reasons[-1] is not None and reasons[:-1] == [None] * (len(frames) - 1)


async def test_batch_of_prompts(http: aiohttp.ClientSession) -> None:
    async with SimServer(SimConfig(tokens_per_s=FAST)) as sim:
        status, batch = await generate(
            http,
            sim,
            {
                "input_ids": [[1, 2], [3, 4, 5]],
                "rid": ["B/1/x", "B/2/x"],
                "sampling_params": {"max_new_tokens": 64},
            },
        )
        assert status == 200 and isinstance(batch, list) and len(batch) == 2
        assert [item["meta_info"]["id"] for item in batch] == ["B/1/x", "B/2/x"]
        _, single = await generate(
            http,
            sim,
            {"input_ids": [3, 4, 5], "rid": "B/2/y", "sampling_params": {"max_new_tokens": 64}},
        )
        assert batch[1]["output_ids"] == single["output_ids"]
        status, texts = await generate(http, sim, {"text": ["a b", "c d e"]})
        assert status == 200 and [t["meta_info"]["prompt_tokens"] for t in texts] == [2, 3]
        assert sim.stats.completed == 5
