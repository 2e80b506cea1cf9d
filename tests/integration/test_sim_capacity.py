"""The SGLang simulator paces work like a batch of slots (a FIFO queue beyond them, throughput
bounded by slots x tokens/s) and frees a slot the way SGLang does: on /abort_request (by rid,
in the queue, or all), on a client that hangs up, and on shutdown.

The engine's scheduling and the benchmarks are only as true as this pacing."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from gen_tui.backends.sim import SimConfig, SimServer
from tests.support.polling import wait_until
from tests.support.sim_http import FAST, abort, generate, reconfigure


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

        await reconfigure(sim, {"slots": 8})
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
        await wait_until(lambda: sim.stats.in_flight == 1)
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

        await reconfigure(sim, {"tokens_per_s": FAST})
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
        await wait_until(lambda: sim.stats.in_flight == 1)
        waiting = asyncio.create_task(
            generate(http, sim, {"input_ids": [2], "rid": "Q/2", "sampling_params": params})
        )
        await wait_until(lambda: sim.stats.queued == 1)
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
        await wait_until(lambda: sim.stats.in_flight == 1)
        task.cancel()
        await wait_until(lambda: sim.stats.in_flight == 0)
        assert (sim.stats.aborted, sim.stats.disconnected) == (1, 1)

        payload = {"input_ids": [2], "rid": "X/2", "stream": True, "sampling_params": params}
        async with http.post(sim.url + "/generate", json=payload) as resp:
            await resp.content.readline()
            assert sim.stats.in_flight == 1
            resp.close()
        await wait_until(lambda: sim.stats.in_flight == 0)
        assert (sim.stats.aborted, sim.stats.disconnected) == (2, 2)

        quick = {"input_ids": [3], "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}}
        status, body = await asyncio.wait_for(generate(http, sim, quick), 1.0)
        assert status == 200 and body["meta_info"]["completion_tokens"] == 2


async def test_stop_aborts_requests_in_flight(http: aiohttp.ClientSession) -> None:
    params = {"max_new_tokens": 1000, "ignore_eos": True}
    sim = SimServer(SimConfig(tokens_per_s=50.0))
    await sim.start()
    task = asyncio.create_task(generate(http, sim, {"input_ids": [1], "sampling_params": params}))
    await wait_until(lambda: sim.stats.in_flight == 1)
    await asyncio.wait_for(sim.stop(), 3.0)
    status, body = await asyncio.wait_for(task, 1.0)
    assert status == 200 and body["meta_info"]["finish_reason"]["type"] == "abort"
