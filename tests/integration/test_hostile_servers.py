"""Hostile HTTP servers on loopback against both clients, streamed and not.

Each test performs one attack from the security audit (issue 16) against a real aiohttp
server: an endless 200 body, an SSE line that never ends, endless small events, a byte
dripped now and then, a huge error message. What must hold: the attempt fails with a
reason that names the bound, memory stays bounded (tracemalloc's peak, a behaviour bound),
the stored reason is cut, and a run goes on with its other samples.
"""

from __future__ import annotations

import asyncio
import contextlib
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from gen_tui.backends.clients import OpenAIClient, Request, SGLangClient
from gen_tui.backends.clients.base import InferenceClient
from gen_tui.backends.clients.limits import Limits, response_limit
from gen_tui.backends.clients.results import RequestFailed
from gen_tui.backends.engine import Engine
from gen_tui.backends.engine.checks import receive
from gen_tui.backends.untrusted import STORED_CHARS
from tests.support.engine import make_config
from tests.support.records import read_records

LIMIT = 1 << 20
IDLE_S = 0.3
LIMITS = Limits(LIMIT, IDLE_S)
SENT = 40 << 20
"""What a hostile server sends at most: far past LIMIT, yet a test without the fix ends."""
CHUNK = b"a" * (64 << 10)
DRIP_S = 1.5
KEEP_ALIVE_IDLE_S = 1.0
"""The idle timeout of the keep-alive test: its gaps are a fifth of it. At IDLE_S (gaps of a
third, 0.1 s) an event loop held 0.3 s beside a second suite read as "no byte for 0.3 s";
the test is about keep-alives over a longer time than the timeout, not about the gap."""


def _openai_answer(stream: bool) -> bytes:
    if stream:
        chunk = {
            "choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n"
    return orjson.dumps(
        {
            "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }
    )


def _sglang_answer(stream: bool) -> bytes:
    payload = orjson.dumps(
        {
            "text": "hi",
            "output_ids": [5, 6],
            "meta_info": {
                "finish_reason": {"type": "stop"},
                "prompt_tokens": 3,
                "completion_tokens": 2,
            },
        }
    )
    return b"data: " + payload + b"\n\ndata: [DONE]\n\n" if stream else payload


class Hostile:
    """A server that answers well, except to the requests `evil` picks, which get `mode`."""

    def __init__(self) -> None:
        self.mode = "endless"
        self.evil: Callable[[dict[str, Any]], bool] = lambda body: True
        self.headers: list[dict[str, str]] = []
        self.first_byte_delay_s = 0.0
        self.endless_probes = False
        self.url = ""

    async def probe(self, request: web.Request) -> web.StreamResponse:
        """/v1/models, /health, /get_server_info and /abort_request: small, or endless."""
        if not self.endless_probes:
            return web.json_response({"max_running_requests": 8})
        response = web.StreamResponse()
        await response.prepare(request)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.write(b'{"max_running_requests": 8, "pad": "')
            for _ in range(SENT // len(CHUNK)):
                await response.write(CHUNK)
        return response

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.headers.append(dict(request.headers))
        return await self._answer(request, _openai_answer, openai=True)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, _sglang_answer, openai=False)

    async def _answer(
        self, request: web.Request, answer: Callable[[bool], bytes], *, openai: bool
    ) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        stream = bool(body.get("stream"))
        if not self.evil(body):
            await asyncio.sleep(self.first_byte_delay_s)
            return web.Response(body=answer(stream), content_type="application/json")
        status = 500 if self.mode == "huge_error" else 200
        response = web.StreamResponse(status=status)
        response.content_type = "text/event-stream" if stream else "application/json"
        await response.prepare(request)
        with contextlib.suppress(ConnectionError, RuntimeError):  # the client hung up
            await self._attack(response, stream, openai, answer)
        return response

    async def _attack(
        self,
        response: web.StreamResponse,
        stream: bool,
        openai: bool,
        answer: Callable[[bool], bytes],
    ) -> None:
        mode = self.mode
        if mode == "drip":
            await response.write(b"data: {" if stream else b"{")
            for _ in range(3):
                await asyncio.sleep(DRIP_S)
                await response.write(b" ")
            return
        if mode == "fast_drip":  # a byte well inside the idle timeout, for ever
            await response.write(b"data: {" if stream else b"{")
            for _ in range(40):  # 3 s: a test of the old code ends, and fails
                await asyncio.sleep(IDLE_S / 4)
                await response.write(b'"')
            return
        if mode == "keep_alive":  # what an honest server sends while it generates
            gap = b": OPENROUTER PROCESSING\n\n" if stream else b" "
            for _ in range(8):
                await response.write(gap)
                await asyncio.sleep(KEEP_ALIVE_IDLE_S / 5)
            await response.write(answer(stream))
            return
        piece = CHUNK
        if mode == "huge_error":  # a 60 KB message, then 40 MB of the white space JSON allows
            head = b'{"error": {"message": "' + b"E" * 60_000 + b'"}}'
            piece = b" " * len(CHUNK)
        elif mode == "events":
            head = b""
        else:  # endless: one JSON string that never ends, and so an SSE line without end
            head = b'data: {"text": "' if stream else b'{"text": "'
        await response.write(head)
        if mode == "events":
            if openai:
                event = {"choices": [{"delta": {"content": "a" * 8192}, "finish_reason": None}]}
            else:  # --stream-output frames: new ids and text each time, never a finish
                event = {"text": "a" * 8192, "output_ids": [7] * 64, "meta_info": {}}
            piece = b"data: " + orjson.dumps(event) + b"\n\n"
        sent = len(head)
        while sent < SENT:
            await response.write(piece)
            sent += len(piece)


@pytest.fixture
async def hostile() -> AsyncIterator[Hostile]:
    server = Hostile()
    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/v1/chat/completions", server.chat)
    app.router.add_post("/generate", server.generate)
    for path in ("/v1/models", "/health", "/get_server_info"):
        app.router.add_get(path, server.probe)
    app.router.add_post("/abort_request", server.probe)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    yield server
    await runner.cleanup()


def _client(api: str, stream: bool, limits: Limits = LIMITS) -> InferenceClient:
    sampling = {"max_new_tokens": 16}
    if api == "openai":
        return OpenAIClient(
            sampling, model="m", api_key=None, key_hint="KEY", stream=stream, limits=limits
        )
    return SGLangClient(sampling, stream=stream, limits=limits)


async def _attempt(api: str, stream: bool, url: str) -> tuple[RequestFailed, int]:
    """One request through the engine's `receive`: (its failure, tracemalloc's peak)."""
    request = Request("A/evil/x", "A", [{"role": "user", "content": "evil"}], [1, 2, 3])
    async with _client(api, stream) as client:
        tracemalloc.start()
        try:
            with pytest.raises(RequestFailed) as caught:
                await receive(client.generate(url, request), url)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return caught.value, peak


BOTH = pytest.mark.parametrize(
    ("api", "stream"),
    [("openai", False), ("openai", True), ("sglang", False), ("sglang", True)],
)


@BOTH
async def test_an_endless_body_or_line_fails_at_the_limit_in_bounded_memory(
    api: str, stream: bool, hostile: Hostile
) -> None:
    failure, peak = await _attempt(api, stream, hostile.url)
    what = "stream event" if stream else "response"
    assert failure.reason == f"{what} over {LIMIT:,} bytes"
    assert failure.retry and failure.counts
    assert peak < 6 * LIMIT, f"peak {peak:,} bytes for a {LIMIT:,} byte limit"


@pytest.mark.parametrize("api", ["openai", "sglang"])
async def test_endless_small_events_fail_at_the_limit_in_bounded_memory(
    api: str, hostile: Hostile
) -> None:
    hostile.mode = "events"
    failure, peak = await _attempt(api, True, hostile.url)
    assert failure.reason == f"response over {LIMIT:,} bytes"
    assert peak < 6 * LIMIT, f"peak {peak:,} bytes for a {LIMIT:,} byte limit"


@BOTH
async def test_a_dripping_server_fails_at_the_idle_timeout(
    api: str, stream: bool, hostile: Hostile
) -> None:
    hostile.mode = "drip"
    started = asyncio.get_running_loop().time()
    failure, _ = await _attempt(api, stream, hostile.url)
    assert failure.reason == f"no byte for {IDLE_S:g} s from {hostile.url}"
    assert failure.retry and failure.counts
    assert asyncio.get_running_loop().time() - started < DRIP_S, "the slot was held"


@BOTH
async def test_a_byte_dripped_inside_the_idle_timeout_fails_once_the_body_is_late(
    api: str, stream: bool, hostile: Hostile
) -> None:
    """Point 9's drip: a byte every quarter of the idle timeout never trips the silence
    bound, yet the body (or the stream's line) must be whole one idle timeout after it
    began, so the slot is let go then, not at the request timeout."""
    hostile.mode = "fast_drip"
    started = asyncio.get_running_loop().time()
    failure, _ = await _attempt(api, stream, hostile.url)
    held = asyncio.get_running_loop().time() - started
    what = "stream line" if stream else "body"
    assert failure.reason == f"{what} not whole {IDLE_S:g} s after it began, from {hostile.url}"
    assert failure.retry and failure.counts
    assert held < 4 * IDLE_S, f"the slot was held {held:.2f} s"


@BOTH
async def test_keep_alives_before_the_answer_are_not_a_drip(
    api: str, stream: bool, hostile: Hostile
) -> None:
    """White space before a body, and whole comment lines in a stream, are what honest
    servers send while they generate: for longer than the idle timeout in all, the answer
    is still taken."""
    hostile.mode = "keep_alive"
    request = Request("A/1/x", "A", [{"role": "user", "content": "hi"}], [1, 2, 3])
    started = asyncio.get_running_loop().time()
    async with _client(api, stream, Limits(LIMIT, KEEP_ALIVE_IDLE_S)) as client:
        answer = await receive(client.generate(hostile.url, request), hostile.url)
    assert answer.completion_tokens == 2
    assert asyncio.get_running_loop().time() - started > 1.5 * KEEP_ALIVE_IDLE_S


@BOTH
async def test_the_wait_for_the_first_byte_is_not_an_idle_timeout(
    api: str, stream: bool, hostile: Hostile
) -> None:
    """A queued or prefilling request may be silent longer than the idle timeout."""
    hostile.evil = lambda body: False
    hostile.first_byte_delay_s = 3 * IDLE_S
    request = Request("A/1/x", "A", [{"role": "user", "content": "hi"}], [1, 2, 3])
    async with _client(api, stream) as client:
        answer = await receive(client.generate(hostile.url, request), hostile.url)
    assert answer.completion_tokens == 2


@BOTH
async def test_a_huge_error_message_is_read_in_part_and_stored_cut(
    api: str, stream: bool, hostile: Hostile
) -> None:
    hostile.mode = "huge_error"
    failure, peak = await _attempt(api, stream, hostile.url)
    assert failure.reason.startswith("HTTP 500: ")
    assert len(failure.reason) < STORED_CHARS + 100
    assert failure.reason.endswith("more characters)")
    assert peak < 6 * LIMIT, f"peak {peak:,} bytes reading an error body"


def test_the_response_limit_follows_max_new_tokens() -> None:
    assert response_limit(4096) == 4096 * 16 * 8 + (4 << 20)
    assert response_limit(32768) > response_limit(4096) > response_limit(1)


@BOTH
async def test_a_run_goes_on_past_a_hostile_answer(
    api: str,
    stream: bool,
    hostile: Hostile,
    tokenizer_dir: Path,
    tmp_path: Path,
) -> None:
    """One sample meets an endless body, then a 50 MB error: it alone fails, with the bound
    named and the stored reason cut; the others are written."""
    prompts = tmp_path / "prompts" / "A.jsonl"
    prompts.parent.mkdir()
    lines = [{"id": "evil", "prompt": "evil"}] + [
        {"id": f"ok{i}", "prompt": "hi"} for i in range(6)
    ]
    prompts.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    modes = iter(["endless", "huge_error"])

    def evil(body: dict[str, Any]) -> bool:
        hit = "/evil/" in body.get("rid", "") or "evil" in str(body.get("messages", ""))
        if hit:
            hostile.mode = next(modes)
        return hit

    hostile.evil = evil
    config = make_config(
        tokenizer_dir,
        prompts.parent,
        tmp_path / "out",
        [hostile.url],
        api=api,
        stream=stream,
        max_retries=1,
        model="m",
    )
    events: list[tuple[str, str]] = []
    engine = Engine(config, on_event=lambda *e: events.append(e), client=_client(api, stream))
    final = await engine.run()
    records = read_records(tmp_path / "out" / "A")
    assert sorted(r["sample_id"] for r in records) == [f"ok{i}" for i in range(6)]
    errors = (tmp_path / "out" / "A" / "errors.jsonl").read_bytes().splitlines()
    assert len(errors) == 1 and final.datasets[0].errors == 1
    error = orjson.loads(errors[0])
    assert error["sample_id"] == "evil" and error["attempts"] == 2
    assert error["reason"].startswith("HTTP 500: ") and len(errors[0]) < STORED_CHARS + 300
    assert all(len(message) < STORED_CHARS + 300 for _, message in events)


async def test_real_providers_are_not_told_the_dataset_and_the_key_is_clean(
    hostile: Hostile,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The simulator's X-Sim-Dataset header goes nowhere unless asked for, and a key saved
    with a Windows line end is sent without its `\\r`."""
    monkeypatch.setenv("HOSTILE_TEST_KEY", "sk-clean-0123\r\n")
    hostile.evil = lambda body: False
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=3),
        tmp_path / "out",
        [hostile.url],
        api="openai",
        model="m",
        api_key_env="HOSTILE_TEST_KEY",
    )
    await Engine(config).run()
    assert len(hostile.headers) == 3
    for headers in hostile.headers:
        assert "X-Sim-Dataset" not in headers
        assert headers["Authorization"] == "Bearer sk-clean-0123"
    hostile.headers.clear()
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=3),
        tmp_path / "out2",
        [hostile.url],
        api="openai",
        model="m",
        api_key_env="HOSTILE_TEST_KEY",
        sim_dataset_header=True,
    )
    await Engine(config).run()
    assert [headers["X-Sim-Dataset"] for headers in hostile.headers] == ["A"] * 3


@BOTH
async def test_a_stop_still_cancels_a_request_waiting_between_pieces(
    api: str, stream: bool, hostile: Hostile
) -> None:
    """The idle watchdog cancels the task it reads in; a cancel from elsewhere (the engine
    stopping) must still arrive as a cancel, not as a failed attempt."""
    hostile.mode = "drip"
    request = Request("A/evil/x", "A", [{"role": "user", "content": "evil"}], [1, 2, 3])
    async with _client(api, stream, Limits(LIMIT, 60.0)) as client:
        task = asyncio.ensure_future(client.generate(hostile.url, request))
        await asyncio.sleep(DRIP_S / 3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.mark.parametrize("api", ["openai", "sglang"])
async def test_endless_probe_answers_are_read_in_part(api: str, hostile: Hostile) -> None:
    """The probes (reachable? capacity? abort) read a few KB, never what a server pours."""
    async with _client(api, False) as client:
        assert await client.capacity(hostile.url) in (None, 8)
        hostile.endless_probes = True
        tracemalloc.start()
        try:
            assert await client.probe(hostile.url) is None
            assert await client.capacity(hostile.url) is None
            await client.abort(hostile.url, "A/1/x")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 4 * LIMIT, f"peak {peak:,} bytes probing"
