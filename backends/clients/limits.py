"""Bounds on what a server may send: how many bytes, and how long it may go quiet.

Servers, proxies and the network between are untrusted. Without bounds an endless 200 body
or an SSE line that never ends grew the engine by about 300 MB/s, a 50 MB error message
went whole into errors.jsonl, and a server that sent a byte now and then held a slot for
the whole request timeout. Every body the HTTP clients read goes through :func:`body` or
:func:`pieces`, which count bytes per piece (never per byte: this is the hot path), time
the silence between pieces and the time a body (or a stream's line) takes once begun.
Each bound that trips is one retryable, counted :class:`RequestFailed` whose reason names
the bound, so the run goes on and errors.jsonl says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import aiohttp

from gen_tui.backends.clients.results import RequestFailed
from gen_tui.backends.clients.wire import BodyHead
from gen_tui.backends.settings import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_NEW_TOKENS

BYTES_PER_TOKEN = 16
"""What one generated token costs in a response body, generously: its id as JSON (up to 7
bytes with the comma) and its text (a few characters, or 12 bytes for an escaped emoji)."""
SLACK = 8
"""Room for what a server adds per token beyond that: escaping, pretty-printing, a
reasoning field, logprobs nobody asked for."""
HEADROOM = 4 << 20
"""Fixed room for everything that does not grow with the answer (metadata, usage, ids)."""
ERROR_BODY_BYTES = 64 << 10
"""The most of an error body read: its message is stored cut to STORED_CHARS anyway, and a
body cut here is quoted saying so (`untrusted.quote_body`)."""


def response_limit(max_new_tokens: int) -> int:
    """The most bytes one answer of up to `max_new_tokens` tokens may take.

    Why this formula: an honest answer can never be larger than `max_new_tokens` tokens of
    BYTES_PER_TOKEN each, so SLACK times that plus HEADROOM is far beyond any real server
    (4.5 MiB for 4,096 tokens, 8 MiB for 32,768), while the memory one hostile server can
    make the engine hold per slot stays a few MiB instead of all there is.
    """
    return max(0, max_new_tokens) * BYTES_PER_TOKEN * SLACK + HEADROOM


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds one client applies to every answer it reads.

    `max_bytes`: a whole body, one SSE event, and what a stream's events add up to.
    `idle_s`: the longest silence allowed between two pieces of a body once it has begun,
    and the longest a body that is not streamed (or one line of a stream) may take from
    its first byte to its end.
    The wait for the first byte is bounded by the request timeout alone: before it, the
    server may be queueing the request behind its running batch or prefilling a long
    prompt, which can legitimately take minutes.
    """

    max_bytes: int = response_limit(DEFAULT_MAX_NEW_TOKENS)
    idle_s: float = DEFAULT_IDLE_TIMEOUT_S

    @classmethod
    def for_sampling(
        cls, sampling: Mapping[str, Any], idle_s: float = DEFAULT_IDLE_TIMEOUT_S
    ) -> Limits:
        """The limits for answers sampled with `sampling` (its `max_new_tokens`)."""
        tokens = int(sampling.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
        return cls(response_limit(tokens), idle_s)

    def for_tokens(self, max_new_tokens: int | None) -> Limits:
        """These limits for one request capped at `max_new_tokens` (None: as they are)."""
        if max_new_tokens is None:
            return self
        return _capped(self, max_new_tokens)

    def too_big(self) -> RequestFailed:
        return RequestFailed(f"response over {self.max_bytes:,} bytes", retry=True)


@functools.lru_cache(maxsize=256)
def _capped(limits: Limits, max_new_tokens: int) -> Limits:
    """Cached: every request asks, nearly all with the same cap (dataclasses.replace
    cost more than the rest of building the request's limits)."""
    return dataclasses.replace(limits, max_bytes=response_limit(max_new_tokens))


async def pieces(
    response: aiohttp.ClientResponse,
    limits: Limits,
    url: str,
    *,
    cap: int | None,
    lines: bool = False,
    first: bytes | None = None,
) -> AsyncGenerator[bytes, None]:
    """The body of `response` in the pieces it arrives in, until its end.

    Three bounds on time, all `limits.idle_s`:
    - a silence longer than it between two pieces, once the first has come;
    - a whole body (`lines` False), from its first byte that is not white space to its
      end. A server that does not stream has the whole answer before it sends it, so a
      body that takes longer is dripped. Leading white space is the keep-alive some
      servers send while they generate, bounded per gap and by the request timeout;
    - one line of a stream (`lines` True), from its first byte to its newline. An honest
      server writes a line whole; whole lines (a keep-alive comment, a token) may come
      as slowly as the per-gap bound allows, because an honest thinking model sends only
      keep-alives for minutes and a retracted request goes quiet mid-answer.
    A body whose pieces add up to more than `cap` bytes fails too (None: no total, for
    streams whose events are bounded one by one).

    The time is kept by one watchdog per body that re-arms itself, not a timer per piece
    (`asyncio.timeout` per piece cost 7.5 us each, a stream of many small events pays it
    per token): a piece costs a clock read and a look at its last byte.

    `first`: the first piece, when the caller has read it already (see :func:`body`).
    """
    content = response.content
    # the wait for the first byte: the request timeout's
    piece = first if first is not None else await content.readany()
    if not piece:
        return
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    idle = limits.idle_s
    waiting_since: float | None = None  # set while waiting for a piece
    opened: float | None = None  # when the body, or the line now open, began
    fired: str | None = None
    handle: asyncio.TimerHandle  # armed below, once `watch` (which re-arms it) is defined

    def late(now: float) -> str | None:
        """Why the body is overdue at `now`, or None."""
        if waiting_since is not None and now >= waiting_since + idle:
            return f"no byte for {idle:g} s from {url}"
        if opened is not None and now >= opened + idle:
            what = "stream line" if lines else "body"
            return f"{what} not whole {idle:g} s after it began, from {url}"
        return None

    def watch() -> None:
        nonlocal handle, fired
        now = loop.time()
        if waiting_since is None:  # reading on: the check runs again before the next wait
            handle = loop.call_at(now + idle, watch)
            return
        fired = late(now)
        if fired is not None:
            task.cancel()
            return
        # a body or line opens before the wait that follows it: its bound comes first
        due = (waiting_since if opened is None else opened) + idle
        handle = loop.call_at(due, watch)

    handle = loop.call_at(loop.time() + idle, watch)
    total = len(piece)
    try:
        while piece:
            now = loop.time()
            if lines:
                if piece[-1] == 10:  # ends with a newline: no line is open
                    opened = None
                elif opened is None or b"\n" in piece:
                    opened = now
            elif opened is None and not piece.isspace():
                opened = now
            if cap is not None and total > cap:
                raise limits.too_big()
            yield piece
            waiting_since = loop.time()
            reason = late(waiting_since)
            if reason is not None:
                raise RequestFailed(reason, retry=True)
            piece = await content.readany()
            waiting_since = None
            total += len(piece)
    except asyncio.CancelledError:
        if fired is not None and task.uncancel() == 0:
            raise RequestFailed(fired, retry=True) from None
        raise
    finally:
        handle.cancel()


async def body(response: aiohttp.ClientResponse, limits: Limits, url: str) -> bytes:
    """The whole body of a 200 answer, refused past `limits.max_bytes` (a declared
    Content-Length over it is refused before a byte is read)."""
    declared = response.content_length
    if declared is not None and declared > limits.max_bytes:
        raise limits.too_big()
    content = response.content
    first = await content.readany()
    if content.at_eof():  # whole in one piece, as most are: nothing left to time
        if len(first) > limits.max_bytes:
            raise limits.too_big()
        return first
    stream = pieces(response, limits, url, cap=limits.max_bytes, first=first)
    async with aclosing(stream):
        return b"".join([piece async for piece in stream])


async def head(response: aiohttp.ClientResponse, limit: int = ERROR_BODY_BYTES) -> bytes | None:
    """The body of a small answer (a probe's, an abort's), or None past `limit` bytes: the
    rest is never read. The caller's short total timeout bounds a drip."""
    parts: list[bytes] = []
    size = 0
    while piece := await response.content.readany():
        parts.append(piece)
        size += len(piece)
        if size > limit:
            return None
    return b"".join(parts)


async def error_body(response: aiohttp.ClientResponse, limits: Limits, url: str) -> BodyHead:
    """The head of an error body, at most ERROR_BODY_BYTES, and the whole body's size when
    known (None when it went on past the bound with no Content-Length): the rest is never
    read (the connection is closed with the response rather than drained)."""
    parts: list[bytes] = []
    size = 0
    async with aclosing(pieces(response, limits, url, cap=None)) as stream:
        async for piece in stream:
            parts.append(piece)
            size += len(piece)
            if size > ERROR_BODY_BYTES:
                return BodyHead(b"".join(parts)[:ERROR_BODY_BYTES], response.content_length)
    return BodyHead.whole(b"".join(parts))
