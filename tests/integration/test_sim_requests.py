"""What the SGLang simulator's /generate refuses (a 400 naming the problem, as SGLang words it)
and how long what it accepts runs: the 128-token default, max_new_tokens, ignore_eos, stop
tokens, and lengths drawn from the dataset's long-tailed profile, as real completions are."""

from __future__ import annotations

import statistics
from typing import Any

import aiohttp
import orjson
import pytest

from gen_tui.backends.sim import LengthProfile, SimConfig, SimServer
from tests.support.sim_http import FAST, generate


@pytest.mark.parametrize(
    ("request_kwargs", "needle"),
    [
        (
            {"data": b'{"input_ids": [1]}', "headers": {"Content-Type": "text/plain"}},
            "Content-Type",
        ),
        ({"data": b"{nope", "headers": {"Content-Type": "application/json"}}, "Invalid JSON"),
        ({"json": [1, 2]}, "JSON object"),
        ({"json": {"sampling_params": {}}}, "should be provided"),
        ({"json": {"text": "a", "input_ids": [1]}}, "not both"),
        ({"json": {"input_ids": []}}, "empty"),
        ({"json": {"text": ""}}, "empty"),
        ({"json": {"input_ids": [1], "sampling_params": {"max_new_tokens": -1}}}, "at least 0"),
        ({"json": {"input_ids": [1], "sampling_params": {"max_new_tokens": "9"}}}, "integer"),
        ({"json": {"input_ids": list(range(64))}}, "longer than the model's context length"),
        (
            {"json": {"input_ids": [1] * 60, "sampling_params": {"max_new_tokens": 10}}},
            "exceeds the model's maximum context length",
        ),
        ({"json": {"input_ids": [1, 1000]}}, "outside the vocabulary"),
        ({"json": {"input_ids": [-1]}}, "outside the vocabulary"),
        ({"json": {"input_ids": [1.5]}}, "integer"),
        ({"json": {"input_ids": [[1], [2]], "rid": "x"}}, "list for batch"),
        ({"json": {"input_ids": [[1], [2]], "stream": True}}, "batches"),
    ],
)
async def test_bad_requests_get_400(
    http: aiohttp.ClientSession, request_kwargs: dict[str, Any], needle: str
) -> None:
    async with SimServer(SimConfig(tokens_per_s=FAST, vocab_size=1000, context_length=64)) as sim:
        async with http.post(sim.url + "/generate", **request_kwargs) as resp:
            assert resp.status == 400
            body = orjson.loads(await resp.read())
        assert needle in body["error"]["message"]
        assert (sim.stats.requests, sim.stats.rejected, sim.stats.completed) == (1, 1, 0)


async def test_without_sampling_params_generates_128(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST, default_profile=LengthProfile(mean=1e5, cv=0.1))
    async with SimServer(config) as sim:
        _, body = await generate(http, sim, {"input_ids": [1, 2]})
    assert body["meta_info"]["completion_tokens"] == len(body["output_ids"]) == 128
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 128}


async def test_cap_truncates_and_ignore_eos_runs_to_the_cap(http: aiohttp.ClientSession) -> None:
    config = SimConfig(
        tokens_per_s=FAST,
        profiles={"long": LengthProfile(mean=1e5, cv=0.1), "short": LengthProfile(mean=5, cv=0)},
    )
    async with SimServer(config) as sim:
        _, capped = await generate(
            http, sim, {"input_ids": [4], "rid": "long/1", "sampling_params": {"max_new_tokens": 7}}
        )
        _, wider = await generate(
            http,
            sim,
            {"input_ids": [4], "rid": "long/1", "sampling_params": {"max_new_tokens": 20}},
        )
        assert capped["meta_info"]["finish_reason"] == {"type": "length", "length": 7}
        assert capped["output_ids"] == wider["output_ids"][:7]
        assert len(wider["output_ids"]) == 20

        params = {"max_new_tokens": 50, "ignore_eos": True}
        _, forced = await generate(
            http, sim, {"input_ids": [4], "rid": "short/1", "sampling_params": params}
        )
        assert forced["meta_info"]["finish_reason"] == {"type": "length", "length": 50}
        assert len(forced["output_ids"]) == 50

        params = {"max_new_tokens": 50, "stop_token_ids": [77], "stop": ["</s>"]}
        _, stopped = await generate(
            http, sim, {"input_ids": [4], "rid": "short/1", "sampling_params": params}
        )
        assert len(stopped["output_ids"]) == 5
        assert stopped["meta_info"]["finish_reason"]["type"] == "stop"
        assert stopped["meta_info"]["finish_reason"]["matched"] in (2, 77, "</s>")


async def test_lengths_follow_the_dataset_profile(http: aiohttp.ClientSession) -> None:
    config = SimConfig(
        tokens_per_s=FAST,
        seed=7,
        profiles={"B2": LengthProfile(mean=200, cv=0.95)},
        default_profile=LengthProfile(mean=30, cv=0.5),
    )
    count = 1500
    prompts = [[i, i + 1, i + 2] for i in range(count)]
    async with SimServer(config) as sim:
        for rids, expected in (([f"B2/{i}/u" for i in range(count)], 200), (None, 30)):
            _, results = await generate(
                http,
                sim,
                {"input_ids": prompts, "rid": rids, "sampling_params": {"max_new_tokens": 30000}},
            )
            lengths = [item["meta_info"]["completion_tokens"] for item in results]
            assert abs(statistics.fmean(lengths) - expected) < 0.08 * expected
            assert min(lengths) >= 1
            assert statistics.median(lengths) < statistics.fmean(lengths)
            assert max(lengths) > 2.5 * expected
