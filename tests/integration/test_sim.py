"""The SGLang simulator must answer like a real SGLang 0.5.x /generate server, pace work like
a batch of slots, and fail on demand, because every other test and the benchmarks trust it."""

from __future__ import annotations

import asyncio
import signal
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson
import pytest

from gen_tui.backends.sim import (
    FAULT_KINDS,
    Faults,
    LengthProfile,
    SimConfig,
    SimServer,
    create_app,
    main,
)

FAST = 1e7
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


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def generate(
    http: aiohttp.ClientSession, sim: SimServer, payload: Any, **kwargs: Any
) -> tuple[int, Any]:
    async with http.post(sim.url + "/generate", json=payload, **kwargs) as resp:
        return resp.status, orjson.loads(await resp.read())


async def stream_events(
    http: aiohttp.ClientSession, sim: SimServer, payload: dict[str, Any]
) -> tuple[list[Any], bytes]:
    """All `data:` payloads of a stream (JSON decoded, `[DONE]` kept as bytes) and the raw body."""
    async with http.post(sim.url + "/generate", json={**payload, "stream": True}) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        raw = await resp.read()
    events: list[Any] = []
    for chunk in raw.split(b"\n\n"):
        if not chunk:
            continue
        assert chunk.startswith(b"data: ")
        data = chunk[len(b"data: ") :]
        events.append(data if data == b"[DONE]" else orjson.loads(data))
    return events, raw


async def until(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def abort(http: aiohttp.ClientSession, sim: SimServer, **body: Any) -> None:
    async with http.post(sim.url + "/abort_request", json=body) as resp:
        assert resp.status == 200


# ---- responses ----------------------------------------------------------------------------------


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
        sim.configure({"seed": 1})
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


# ---- validation ---------------------------------------------------------------------------------


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


# ---- capacity, aborts, disconnects --------------------------------------------------------------


async def test_slots_queue_fifo_and_bound_throughput(http: aiohttp.ClientSession) -> None:
    config = SimConfig(slots=4, tokens_per_s=200.0)
    params = {"max_new_tokens": 50, "ignore_eos": True}  # 0.25 s a request

    async def one(i: int) -> float:
        _, body = await generate(http, sim, {"input_ids": [i], "sampling_params": params})
        return body["meta_info"]["e2e_latency"]

    async with SimServer(config) as sim:
        loop = asyncio.get_running_loop()
        started = loop.time()
        latencies = sorted(await asyncio.gather(*(one(i) for i in range(8))))
        elapsed = loop.time() - started
        assert sim.stats.max_in_flight == 4
        assert min(latencies) >= 0.24
        assert min(latencies[4:]) - min(latencies[:4]) >= 0.2
        assert 8 * 50 / elapsed <= 4 * 200 * 1.05
        assert elapsed < 3.0
        assert (sim.stats.in_flight, sim.stats.queued, sim.stats.completed) == (0, 0, 8)

        sim.configure({"slots": 8})
        latencies = await asyncio.gather(*(one(i) for i in range(8)))
        assert sim.stats.max_in_flight == 8
        assert max(latencies) < 0.45


async def test_a_late_event_loop_costs_no_capacity(http: aiohttp.ClientSession) -> None:
    """A queued request decodes from the moment the model freed its slot, not from whenever
    the simulator's loop got round to it: capacity stays slots x tokens/s under load."""
    config = SimConfig(slots=1, tokens_per_s=1000.0)
    params = {"max_new_tokens": 100, "ignore_eos": True}  # 0.1 s a request

    async def one(i: int) -> float:
        await generate(http, sim, {"input_ids": [i], "sampling_params": params})
        return loop.time() - started

    async with SimServer(config) as sim:
        loop = asyncio.get_running_loop()
        started = loop.time()
        # The loop is stuck from 0.05 s to 0.35 s: the first answer's slot frees at 0.1 s in
        # the model, but the simulator only sees it at 0.35 s.
        loop.call_later(0.05, time.sleep, 0.3)
        first, second = await asyncio.gather(one(0), one(1))
        assert first >= 0.3
        assert second < 0.42, second  # decoded 0.1-0.2 s; without the fix it ends at 0.45 s


async def test_abort_request_returns_partial_output(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=100.0)
    params = {"max_new_tokens": 1000, "ignore_eos": True}
    async with SimServer(config) as sim:
        task = asyncio.create_task(
            generate(http, sim, {"input_ids": [3, 1], "rid": "D/1/a", "sampling_params": params})
        )
        await until(lambda: sim.stats.in_flight == 1)
        await asyncio.sleep(0.2)
        await abort(http, sim, rid="D/1/a")
        status, body = await asyncio.wait_for(task, 2.0)
        assert status == 200
        meta = body["meta_info"]
        assert meta["finish_reason"] == {
            "type": "abort",
            "message": "Aborted",
            "status_code": None,
            "err_type": None,
        }
        assert 0 < meta["completion_tokens"] == len(body["output_ids"]) < 1000
        assert (sim.stats.aborted, sim.stats.completed, sim.stats.in_flight) == (1, 0, 0)

        sim.configure({"tokens_per_s": FAST})
        _, full = await generate(
            http, sim, {"input_ids": [3, 1], "rid": "D/1/b", "sampling_params": params}
        )
        assert full["output_ids"][: len(body["output_ids"])] == body["output_ids"]
        await abort(http, sim, rid="no-such-request")


async def test_abort_request_ends_a_stream(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=100.0, frame_tokens=2)
    payload = {
        "input_ids": [8],
        "rid": "D/2/a",
        "stream": True,
        "sampling_params": {"max_new_tokens": 1000, "ignore_eos": True},
    }
    async with SimServer(config) as sim, http.post(sim.url + "/generate", json=payload) as resp:
        first = await asyncio.wait_for(resp.content.readline(), 2.0)
        assert orjson.loads(first[len(b"data: ") :])["meta_info"]["finish_reason"] is None
        await abort(http, sim, rid="D/2/a")
        rest = await asyncio.wait_for(resp.read(), 2.0)
        events = [chunk for chunk in rest.split(b"\n\n") if chunk.strip()]
        assert events[-1] == b"data: [DONE]"
        last = orjson.loads(events[-2][len(b"data: ") :])
        assert last["meta_info"]["finish_reason"]["type"] == "abort"
        assert "e2e_latency" in last["meta_info"]
        assert 0 < last["meta_info"]["completion_tokens"] < 1000
        assert sim.stats.aborted == 1


async def test_abort_in_queue_and_abort_all(http: aiohttp.ClientSession) -> None:
    config = SimConfig(slots=1, tokens_per_s=100.0)
    params = {"max_new_tokens": 1000, "ignore_eos": True}
    async with SimServer(config) as sim:
        running = asyncio.create_task(
            generate(http, sim, {"input_ids": [1], "rid": "Q/1", "sampling_params": params})
        )
        await until(lambda: sim.stats.in_flight == 1)
        waiting = asyncio.create_task(
            generate(http, sim, {"input_ids": [2], "rid": "Q/2", "sampling_params": params})
        )
        await until(lambda: sim.stats.queued == 1)
        async with http.get(sim.url + "/get_load") as resp:
            load = orjson.loads(await resp.read())
        assert load[0]["num_running_reqs"] == 1 and load[0]["num_waiting_reqs"] == 1

        await abort(http, sim, rid="Q/2")
        _, queued = await asyncio.wait_for(waiting, 2.0)
        assert queued["meta_info"]["finish_reason"]["message"] == "Abort in waiting queue"
        assert queued["output_ids"] == [] and queued["meta_info"]["completion_tokens"] == 0
        assert not running.done()

        await abort(http, sim, rid="", abort_all=True)
        _, first = await asyncio.wait_for(running, 2.0)
        assert first["meta_info"]["finish_reason"]["type"] == "abort"
        assert (sim.stats.aborted, sim.stats.queued, sim.stats.in_flight) == (2, 0, 0)


async def test_client_disconnect_frees_the_slot(http: aiohttp.ClientSession) -> None:
    config = SimConfig(slots=1, tokens_per_s=100.0)
    params = {"max_new_tokens": 1000, "ignore_eos": True}
    async with SimServer(config) as sim:
        task = asyncio.create_task(
            generate(http, sim, {"input_ids": [1], "rid": "X/1", "sampling_params": params})
        )
        await until(lambda: sim.stats.in_flight == 1)
        task.cancel()
        await until(lambda: sim.stats.in_flight == 0)
        assert (sim.stats.aborted, sim.stats.disconnected) == (1, 1)

        payload = {"input_ids": [2], "rid": "X/2", "stream": True, "sampling_params": params}
        async with http.post(sim.url + "/generate", json=payload) as resp:
            await resp.content.readline()
            assert sim.stats.in_flight == 1
            resp.close()
        await until(lambda: sim.stats.in_flight == 0)
        assert (sim.stats.aborted, sim.stats.disconnected) == (2, 2)

        quick = {"input_ids": [3], "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}}
        status, body = await asyncio.wait_for(generate(http, sim, quick), 1.0)
        assert status == 200 and body["meta_info"]["completion_tokens"] == 2


async def test_stop_aborts_requests_in_flight(http: aiohttp.ClientSession) -> None:
    params = {"max_new_tokens": 1000, "ignore_eos": True}
    sim = SimServer(SimConfig(tokens_per_s=50.0))
    await sim.start()
    task = asyncio.create_task(generate(http, sim, {"input_ids": [1], "sampling_params": params}))
    await until(lambda: sim.stats.in_flight == 1)
    await asyncio.wait_for(sim.stop(), 3.0)
    status, body = await asyncio.wait_for(task, 1.0)
    assert status == 200 and body["meta_info"]["finish_reason"]["type"] == "abort"


# ---- faults -------------------------------------------------------------------------------------


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
        sim.configure({"faults": {"timeout": 0.0, "hang_s": 0.05}})
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


# ---- info endpoints and test hooks --------------------------------------------------------------


async def test_info_endpoints(http: aiohttp.ClientSession) -> None:
    async with SimServer(SimConfig(tokens_per_s=FAST, slots=5, context_length=4096)) as sim:
        async with http.get(sim.url + "/health") as resp:
            assert resp.status == 200 and await resp.read() == b""
        async with http.get(sim.url + "/get_model_info") as resp:
            info = orjson.loads(await resp.read())
        assert info["model_path"] == "gen-tui/simulated-model"
        assert info["model_type"] == "simulated" and info["is_generation"] is True
        assert "tokenizer_path" in info
        async with http.get(sim.url + "/get_server_info") as resp:
            server = orjson.loads(await resp.read())
        assert server["version"] == "0.5.x-sim" and server["status"] == "ready"
        assert server["max_running_requests"] == 5
        assert server["max_total_num_tokens"] == 5 * 4096
        assert server["sim"]["slots"] == 5
        async with http.get(sim.url + "/get_load") as resp:
            load = orjson.loads(await resp.read())
        assert load[0]["dp_rank"] == 0 and load[0]["num_reqs"] == 0

        await generate(http, sim, {"input_ids": [1], "rid": "Z/1/a"})
        async with http.get(sim.url + "/_sim/stats") as resp:
            stats = orjson.loads(await resp.read())
        assert stats["requests"] == stats["completed"] == 1
        assert stats["completed_rids"] == ["Z/1/a"]
        assert stats["total_completion_tokens"] == sim.stats.total_completion_tokens > 0


async def test_sim_config_patch(http: aiohttp.ClientSession) -> None:
    config = SimConfig(tokens_per_s=FAST)
    faults = config.faults
    async with SimServer(config) as sim:
        patch = {
            "tokens_per_s": 123.0,
            "slots": 3,
            "faults": {"rate_429": 0.25},
            "profiles": {"X": {"mean": 10, "cv": 0.1}},
        }
        async with http.post(sim.url + "/_sim/config", json=patch) as resp:
            assert resp.status == 200
            shown = orjson.loads(await resp.read())
        assert shown["tokens_per_s"] == 123.0 and shown["faults"]["rate_429"] == 0.25
        assert sim.config is config and config.faults is faults
        assert (config.tokens_per_s, config.slots, faults.rate_429) == (123.0, 3, 0.25)
        assert config.profiles["X"] == LengthProfile(mean=10, cv=0.1)

        for bad in ({"slots": 0}, {"bogus": 1}, {"faults": {"rate_429": 2}}, {"tokens_per_s": "x"}):
            async with http.post(sim.url + "/_sim/config", json=bad) as resp:
                assert resp.status == 400
                assert orjson.loads(await resp.read())["error"]["message"]
        assert (config.slots, faults.rate_429, config.tokens_per_s) == (3, 0.25, 123.0)


def test_invalid_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="slots"):
        create_app(SimConfig(slots=0))
    with pytest.raises(ValueError, match="tokens_per_s"):
        create_app(SimConfig(tokens_per_s=0))
    with pytest.raises(ValueError, match="mean"):
        LengthProfile(mean=0)
    with pytest.raises(ValueError, match="rate_429"):
        Faults(rate_429=1.5)


# ---- command line -------------------------------------------------------------------------------


async def test_cli_serves_until_sigterm(http: aiohttp.ClientSession) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from gen_tui.backends.sim import main; raise SystemExit(main())",
        "--port",
        "0",
        "--slots",
        "2",
        "--tokens-per-s",
        "1e7",
        "--profile",
        "B2=100:0.5",
        "--fail-429",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 15.0)  # type: ignore[union-attr]
        assert line.startswith(b"listening on http://127.0.0.1:")
        url = line.decode().split()[-1]
        async with http.get(url + "/health") as resp:
            assert resp.status == 200
        async with http.get(url + "/get_server_info") as resp:
            info = orjson.loads(await resp.read())
        assert info["max_running_requests"] == 2
        assert info["sim"]["profiles"] == {"B2": {"mean": 100.0, "cv": 0.5}}
        async with http.post(url + "/generate", json={"input_ids": [1], "rid": "B2/1"}) as resp:
            assert resp.status == 200
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
        ["--fail-5xx", "1.5"],
        ["--profile", "B2"],
        ["--profile", "B2=-3"],
        ["--slots", "0"],
        ["--tokens-per-s", "fast"],
        ["--port", "70000"],
        ["--bogus"],
    ],
)
def test_cli_bad_flags_give_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gen-tui sim: error: ")
    assert captured.err.count("\n") == 1
