"""The one SSE reader both clients share: framing is independent of how TCP cuts the body,
a stream cut short is never taken for a complete one, and a whole last event is kept."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from gen_tui.backends.clients import openai_api, sglang
from gen_tui.backends.clients.results import RequestFailed
from gen_tui.backends.clients.wire import sse_events

# What real servers send around their events: OpenRouter's keep-alive comment, an `event:`
# field, CRLF line ends, blank lines, a `data:` without its space, unicode split across
# pieces, and a data line containing "data:" itself.
STREAM = (
    b": OPENROUTER PROCESSING\n\n"
    b'data: {"n": 1, "text": "caf\xc3\xa9 \xe2\x82\xac"}\n\n'
    b"event: message\r\n"
    b'data:{"n": 2, "text": "data: [DONE]"}\r\n\r\n'
    b"\n"
    b'data: {"n": 3, "usage": {"completion_tokens": 7}}\n\n'
)
EVENTS = [
    {"n": 1, "text": "café €"},
    {"n": 2, "text": "data: [DONE]"},
    {"n": 3, "usage": {"completion_tokens": 7}},
]


async def pieces(parts: Iterable[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def split(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


async def events(parts: Iterable[bytes]) -> list[dict[str, Any]]:
    return [event async for event in sse_events(pieces(parts))]


@pytest.mark.parametrize(
    "body",
    [STREAM + b"data: [DONE]\n\n", STREAM, STREAM.rstrip(b"\n")],
    ids=["done", "no-done", "no-trailing-newline"],
)
async def test_every_byte_boundary_gives_the_same_events(body: bytes) -> None:
    assert await events([body]) == EVENTS
    for cut in range(len(body) + 1):
        assert await events(split(body, [cut])) == EVENTS, f"cut at byte {cut}"
    assert await events([body[i : i + 1] for i in range(len(body))]) == EVENTS
    rng = random.Random(5)
    for _ in range(200):
        cuts = rng.sample(range(1, len(body)), rng.randint(2, 12))
        assert await events(split(body, cuts)) == EVENTS, f"cuts at {sorted(cuts)}"


async def test_done_ends_the_stream_without_reading_on() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'data: {"n": 1}\n\ndata: [DONE]\n\n'
        raise AssertionError("read past [DONE]")

    assert [e async for e in sse_events(body())] == [{"n": 1}]


def object_cuts(body: bytes) -> list[range]:
    """For each data line's JSON object, the cut positions that leave it unfinished."""
    spans: list[range] = []
    offset = 0
    for line in body.splitlines(keepends=True):
        if line.startswith(b"data:"):
            spans.append(range(offset + line.index(b"{") + 1, offset + line.rindex(b"}") + 1))
        offset += len(line)
    return spans


async def test_a_stream_cut_anywhere_never_yields_a_wrong_event() -> None:
    """Every prefix of a body either gives a prefix of its events or fails, and a cut inside
    a JSON object always fails: a half event must never become (part of) a record."""
    body = STREAM.rstrip(b"\n")
    spans = object_cuts(body)
    assert len(spans) == len(EVENTS)
    for cut in range(len(body) + 1):
        try:
            got = await events(split(body, [cut // 2, cut])[:-1])
        except RequestFailed as exc:
            assert exc.retry and exc.counts, f"cut at byte {cut}: {exc.reason}"
            continue
        assert not any(cut in span for span in spans), f"cut at {cut} inside an object: {got}"
        assert got == EVENTS[: len(got)], f"cut at byte {cut}"


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (b'data: {"n": 9}', [{"n": 9}]),
        (b'data:{"n": 9}  ', [{"n": 9}]),
        (b"data: [DONE]", []),
        (b": keep-alive", []),
        (b"event: message", []),
        (b"   ", []),
    ],
)
async def test_an_unterminated_last_line_that_is_whole_is_kept(
    tail: bytes, expected: list[dict[str, Any]]
) -> None:
    assert await events([b'data: {"n": 1}\n\n', tail]) == [{"n": 1}, *expected]


@pytest.mark.parametrize(
    "tail",
    [
        b'data: {"n": 9',
        b'data: {"n": 9, "text": "}',
        b"data: ",
        b"data:",
        b"d",
        b"dat",
        b"data: [DO",
    ],
)
async def test_an_unterminated_last_line_that_is_cut_fails_the_attempt(tail: bytes) -> None:
    got: list[dict[str, Any]] = []
    with pytest.raises(RequestFailed, match="stream ended inside an event") as info:
        async for event in sse_events(pieces([b'data: {"n": 1}\n\n', tail])):
            got.append(event)
    assert info.value.retry and info.value.counts
    assert got == [{"n": 1}]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"data: {not json}\n\n", "stream event is not valid JSON"),
        (b"data: [1, 2]\n\n", "stream event is not a JSON object"),
        (b"data: 12\r\n", "stream event is not a JSON object"),
    ],
)
async def test_an_event_that_is_not_an_object_fails_the_attempt(line: bytes, reason: str) -> None:
    with pytest.raises(RequestFailed, match=reason) as info:
        await events([b'data: {"n": 1}\n\n', line, b'data: {"n": 2}\n\n'])
    assert info.value.retry


# Both clients on a loopback server that sends a fixed body and closes it cleanly: what
# a server that omits the last newline, or one that dies mid-event, looks like to them.


def _openai_body() -> bytes:
    head = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    first = {**head, "choices": [{"index": 0, "delta": {"content": "Hello"}}]}
    usage = {"prompt_tokens": 3, "completion_tokens": 2}
    last = {
        **head,
        "choices": [{"index": 0, "delta": {"content": " world"}, "finish_reason": "stop"}],
        "usage": usage,
    }
    return b"data: " + orjson.dumps(first) + b"\n\ndata: " + orjson.dumps(last)


def _sglang_body() -> bytes:
    meta = {"prompt_tokens": 3, "completion_tokens": 3}
    first = {"text": "a b", "output_ids": [5, 6], "meta_info": {**meta, "completion_tokens": 2}}
    last = {
        "text": "a b c",
        "output_ids": [5, 6, 7],
        "meta_info": {**meta, "finish_reason": {"type": "length", "length": 3}},
    }
    return b"data: " + orjson.dumps(first) + b"\n\ndata: " + orjson.dumps(last)


@pytest.fixture
async def serve_body() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []

    async def start(body: bytes) -> str:
        async def handler(request: web.Request) -> web.StreamResponse:
            await request.read()
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            await response.write(body)
            await response.write_eof()
            return response

        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        app.router.add_post("/generate", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


async def _openai(url: str) -> Any:
    async with aiohttp.ClientSession() as session:
        return await openai_api.chat(
            session,
            url,
            messages=[{"role": "user", "content": "hi"}],
            sampling={"max_new_tokens": 8},
            model="m",
            api_key=None,
            key_hint="KEY",
            dataset="A",
            stream=True,
        )


async def _sglang(url: str) -> Any:
    async with aiohttp.ClientSession() as session:
        return await sglang.generate(session, url, [1, 2, 3], {}, "rid", stream=True)


async def test_both_clients_keep_a_whole_last_event_without_its_newline(serve_body: Any) -> None:
    chat = await _openai(await serve_body(_openai_body()))
    assert (chat.text, chat.finish_reason, chat.completion_tokens) == ("Hello world", "stop", 2)
    native = await _sglang(await serve_body(_sglang_body()))
    assert (native.output_ids, native.finish_reason, native.completion_tokens) == (
        [5, 6, 7],
        "length",
        3,
    )


@pytest.mark.parametrize("client", ["openai", "sglang"])
async def test_both_clients_retry_a_stream_cut_inside_its_last_event(
    client: str, serve_body: Any
) -> None:
    body = _openai_body() if client == "openai" else _sglang_body()
    call = _openai if client == "openai" else _sglang
    for cut in (len(body) - 1, len(body) - 20, body.rindex(b"data:") + 7):
        with pytest.raises(RequestFailed) as info:
            await call(await serve_body(body[:cut]))
        assert info.value.retry and info.value.counts, info.value.reason
