"""Fuzz SSE streams through the real SGLang and OpenAI clients, over a real socket.

A tiny aiohttp server (the test's own, not the simulator) sends a stream the test composed,
cut into pieces at random byte boundaries with a pause after each, so the client really
reads it piece by piece. Properties:

- split anywhere, a valid stream gives exactly the answer an independent reading of it
  gives (ids, token counts, finish reason, text);
- damaged (cut, spliced, bytes flipped, fields of the wrong type), the client itself gives
  either a sound answer or `RequestFailed`: never another exception, never a hang.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given, note
from hypothesis import strategies as st

from gen_tui.backends.clients import openai_api, sglang
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.engine import check_generation

from .conftest import Examples

CASE_TIMEOUT_S = 10.0


async def serve_once(
    pieces: list[bytes], call: Callable[[aiohttp.ClientSession, str], Awaitable[Generation]]
) -> Generation:
    """Serve `pieces` as one SSE body to whatever the client posts; return its answer."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for piece in pieces:
                await response.write(piece)
                await asyncio.sleep(0.002)  # a separate read on the client side
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client gave up on a damaged stream before its end: its right
        return response

    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            return await asyncio.wait_for(
                call(session, f"http://127.0.0.1:{port}"), timeout=CASE_TIMEOUT_S
            )
    finally:
        await runner.cleanup()


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(body) + 1) for cut in cuts} | {0, len(body)})
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


def sglang_call(session: aiohttp.ClientSession, url: str) -> Awaitable[Generation]:
    return sglang.generate(session, url, [5, 6, 7], {"max_new_tokens": 64}, "A/1/x", stream=True)


def openai_call(session: aiohttp.ClientSession, url: str) -> Awaitable[Generation]:
    return openai_api.chat(
        session,
        url,
        messages=[{"role": "user", "content": "hi"}],
        sampling={"max_new_tokens": 64},
        model="m",
        api_key="sk-test",
        key_hint="KEY",
        dataset="A",
        stream=True,
    )


# ---- valid streams and what they mean ---------------------------------------------------


@st.composite
def sglang_streams(draw: st.DrawFn) -> tuple[bytes, dict[str, Any]]:
    """An SGLang stream (cumulative or --stream-output frames) and the answer it carries."""
    ids = draw(st.lists(st.integers(0, 50000), min_size=1, max_size=20))
    incremental = draw(st.booleans())
    finish = draw(st.sampled_from([{"type": "stop", "matched": 2}, {"type": "length"}]))
    frames, sent = [], 0
    while sent < len(ids):
        end = min(len(ids), sent + draw(st.integers(1, 6)))
        part = ids[sent:end] if incremental else ids[:end]
        meta = {"id": "A/1/x", "prompt_tokens": 3, "completion_tokens": end}
        meta["finish_reason"] = finish if end == len(ids) else None
        text = " ".join(f"w{t}" for t in part)
        frames.append({"text": text, "output_ids": part, "meta_info": meta})
        sent = end
    eol = draw(st.sampled_from([b"\n\n", b"\r\n\r\n", b"\n"]))
    lines = []
    for frame in frames:
        if draw(st.integers(0, 5)) == 0:
            lines.append(b": keep-alive" + eol)
        lines.append(b"data: " + json.dumps(frame).encode() + eol)
    if draw(st.booleans()):
        lines.append(b"data: [DONE]" + eol)
    expected = {
        "output_ids": ids,
        "completion_tokens": len(ids),
        "prompt_tokens": 3,
        "finish_reason": finish["type"],
        # With --stream-output each frame's text is only the new part, and the client keeps
        # the last frame's text: a defect of sglang.py, reported, not asserted here.
        "text": None if incremental else frames[-1]["text"],
    }
    return b"".join(lines), expected


@st.composite
def openai_streams(draw: st.DrawFn) -> tuple[bytes, dict[str, Any]]:
    """A chat completion stream ending in each way seen in the wild, and its answer."""
    parts = draw(st.lists(st.text(max_size=8), min_size=1, max_size=8))
    finish = draw(st.sampled_from(["stop", "length"]))
    ending = draw(st.sampled_from(["done", "none", "usage_with_choices", "usage_no_choices"]))
    usage = {"prompt_tokens": 4, "completion_tokens": len(parts), "total_tokens": 4 + len(parts)}
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(content: str, reason: str | None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": {"content": content}, "finish_reason": reason}
        return {**head, "choices": [choice], **extra}

    events = [chunk(text, None) for text in parts[:-1]]
    last_extra = {"usage": usage} if ending in ("none", "usage_with_choices") else {}
    events.append(chunk(parts[-1], finish, **last_extra))
    if ending == "done":
        events.append({**head, "choices": [], "usage": usage})
    elif ending == "usage_no_choices":
        events.append({**head, "usage": usage})
    eol = draw(st.sampled_from([b"\n\n", b"\r\n\r\n"]))
    body = b"".join(b"data: " + json.dumps(event).encode() + eol for event in events)
    if draw(st.booleans()):
        body = b": OPENROUTER PROCESSING" + eol + body
    if ending != "none":
        body += b"data: [DONE]" + eol
    expected = {
        "output_ids": None,
        "completion_tokens": len(parts),
        "prompt_tokens": 4,
        "finish_reason": finish,
        "text": "".join(parts),
    }
    return body, expected


def same_answer(generation: Generation, expected: dict[str, Any]) -> None:
    got = {
        "output_ids": generation.output_ids,
        "completion_tokens": generation.completion_tokens,
        "prompt_tokens": generation.prompt_tokens,
        "finish_reason": generation.finish_reason,
        "text": generation.text,
    }
    if expected["text"] is None:
        got["text"] = None
    assert got == expected


@given(sglang_streams(), st.lists(st.integers(0, 10**6), max_size=12))
def test_sglang_stream_split_anywhere_gives_the_same_answer(
    examples: Examples, case: tuple[bytes, dict[str, Any]], cuts: list[int]
) -> None:
    examples()
    body, expected = case
    same_answer(asyncio.run(serve_once(split(body, cuts), sglang_call)), expected)


@given(openai_streams(), st.lists(st.integers(0, 10**6), max_size=12))
def test_openai_stream_split_anywhere_gives_the_same_answer(
    examples: Examples, case: tuple[bytes, dict[str, Any]], cuts: list[int]
) -> None:
    examples()
    body, expected = case
    same_answer(asyncio.run(serve_once(split(body, cuts), openai_call)), expected)


# ---- damaged streams --------------------------------------------------------------------

odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.text(max_size=4),
    st.lists(st.integers(-2, 5), max_size=3),
    st.dictionaries(st.sampled_from(["type", "x", "content"]), st.integers(0, 2), max_size=2),
)


def damage_json(body: bytes, draw: st.DrawFn, fields: list[str]) -> bytes:
    """Give one event's field a value of a wrong type (as a buggy proxy might)."""
    lines = body.split(b"\n")
    indexes = [i for i, line in enumerate(lines) if line.startswith(b"data: {")]
    if not indexes:
        return body
    index = draw(st.sampled_from(indexes))
    event = json.loads(lines[index][6:])
    path = draw(st.sampled_from(fields)).split(".")
    target = event
    for key in path[:-1]:
        if not isinstance(target, dict):
            return body
        target = target.get(key) if not key.isdigit() else target
        if isinstance(target, list):
            target = target[0] if target else None
    if not isinstance(target, dict):
        return body
    target[path[-1]] = draw(odd_values)
    lines[index] = b"data: " + json.dumps(event).encode()
    return b"\n".join(lines)


def damage_bytes(body: bytes, draw: st.DrawFn) -> bytes:
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cut", "insert", "flip", "delete"]))
        at = draw(st.integers(0, len(body)))
        if op == "cut":
            body = body[:at]
        elif op == "insert":
            body = body[:at] + draw(st.binary(min_size=1, max_size=5)) + body[at:]
        elif op == "flip" and at < len(body):
            body = body[:at] + bytes([body[at] ^ draw(st.integers(1, 255))]) + body[at + 1 :]
        else:
            body = body[:at] + body[at + draw(st.integers(1, 10)) :]
    return body


SGLANG_FIELDS = [
    "output_ids", "meta_info", "meta_info.finish_reason", "meta_info.completion_tokens",
    "meta_info.prompt_tokens", "text", "error",
]  # fmt: skip
OPENAI_FIELDS = [
    "choices", "choices.0.delta", "choices.0.delta.content", "choices.0.finish_reason",
    "usage", "usage.completion_tokens", "usage.prompt_tokens", "usage.cost", "error",
]  # fmt: skip


def answer_or_clear_failure(pieces: list[bytes], call: Any) -> None:
    """What a client makes of a damaged stream: a sound answer or one failed attempt.

    The client alone, not through `engine.receive` (the engine's catch-all around every
    call, kept as a second line): any exception but `RequestFailed` fails this test. The
    answer then passes the engine's `check_generation` or is refused as a retry, as it is
    in a run.
    """
    try:
        generation = check_generation(asyncio.run(serve_once(pieces, call)))
    except RequestFailed as exc:
        assert exc.reason
        return
    assert isinstance(generation, Generation)
    assert isinstance(generation.completion_tokens, int) and generation.completion_tokens >= 0
    assert generation.text is None or isinstance(generation.text, str)
    if generation.output_ids is not None:
        assert len(generation.output_ids) == generation.completion_tokens
        assert all(type(token) is int for token in generation.output_ids)


@given(st.data(), sglang_streams(), st.lists(st.integers(0, 10**6), max_size=6))
def test_damaged_sglang_stream_gives_an_answer_or_a_clear_failure(
    examples: Examples, data: st.DataObject, case: tuple[bytes, dict[str, Any]], cuts: list[int]
) -> None:
    examples()
    body, _ = case
    if data.draw(st.booleans()):
        body = damage_json(body, data.draw, SGLANG_FIELDS)
    else:
        body = damage_bytes(body, data.draw)
    note(repr(body))
    answer_or_clear_failure(split(body, cuts), sglang_call)


@given(st.data(), openai_streams(), st.lists(st.integers(0, 10**6), max_size=6))
def test_damaged_openai_stream_gives_an_answer_or_a_clear_failure(
    examples: Examples, data: st.DataObject, case: tuple[bytes, dict[str, Any]], cuts: list[int]
) -> None:
    examples()
    body, _ = case
    if data.draw(st.booleans()):
        body = damage_json(body, data.draw, OPENAI_FIELDS)
    else:
        body = damage_bytes(body, data.draw)
    note(repr(body))
    answer_or_clear_failure(split(body, cuts), openai_call)


@pytest.mark.parametrize(
    ("call", "frame", "named"),
    [
        (
            sglang_call,
            {"output_ids": 1, "meta_info": {"completion_tokens": 1}},
            "output_ids of type int",
        ),
        (sglang_call, {"output_ids": [1], "meta_info": []}, "meta_info of type list"),
        (
            sglang_call,
            {"output_ids": "ab", "meta_info": {"completion_tokens": 2}},
            "output_ids of type str",
        ),
        (
            sglang_call,
            {"output_ids": [1], "meta_info": {"completion_tokens": 1.0}},
            "completion_tokens of type float",
        ),
        (sglang_call, {"output_ids": [1], "text": 7, "meta_info": {}}, "text of type int"),
        (openai_call, {"choices": 5}, "choices of type int"),
        (openai_call, {"choices": ["x"]}, "a choice of type str"),
        (openai_call, {"choices": [{"delta": []}]}, "delta of type list"),
        (openai_call, {"choices": [{"delta": "文字" * 20}]}, "delta of type str"),
        (openai_call, {"choices": [{"delta": {"content": 3}}]}, "content of type int"),
        (openai_call, {"choices": [{"delta": {"content": [3]}}]}, "content part of type int"),
        (
            openai_call,
            {"choices": [{"delta": {}, "finish_reason": 1}]},
            "finish_reason of type int",
        ),
        (openai_call, {"choices": [{"finish_reason": "stop"}], "usage": 5}, "usage of type int"),
        (
            openai_call,
            {"choices": [{"finish_reason": "stop"}], "usage": {"completion_tokens": "9"}},
            "completion_tokens of type str",
        ),
    ],
)
def test_a_wrong_typed_field_is_one_failed_attempt_naming_it(
    call: Any, frame: dict[str, Any], named: str
) -> None:
    """The shapes the fuzzer found, from the client alone: each a `RequestFailed` naming the
    field and its type (the clients once raised `TypeError`/`AttributeError`, or took a
    string for ids)."""
    body = f"data: {json.dumps(frame)}\n\ndata: [DONE]\n\n".encode()
    with pytest.raises(RequestFailed) as failure:
        asyncio.run(serve_once([body], call))
    assert named in failure.value.reason and failure.value.retry


def test_content_in_parts_is_the_text_of_its_text_parts() -> None:
    """Some servers send `content` as a list of typed parts: the answer is its text parts,
    joined; a model's thinking or other parts are not answer text."""
    parts = [
        {"type": "text", "text": "he"},
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "llo"},
    ]
    chunk = {
        "choices": [{"delta": {"content": parts}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2},
    }
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    generation = asyncio.run(serve_once([body], openai_call))
    assert (generation.text, generation.completion_tokens) == ("hello", 2)
