"""Reading a server's answer off the wire, the same for every API: transport failures as
:class:`RequestFailed`, error bodies read within a bound and quoted safely, `Retry-After`,
typed JSON fields and server-sent events.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from gen_tui.backends.clients.results import RequestFailed
from gen_tui.backends.untrusted import quote_body


class transport_errors:  # lower case: used as the function it replaced
    """Turn aiohttp's and the clock's exceptions into RequestFailed, the same for every API.

    A refused or dropped connection does not count against the sample (the server is away);
    a timeout or a cut-short body does. A class, not a @contextmanager: every request goes
    through it, and a generator-based one cost a generator and its frames each time.
    """

    __slots__ = ("url",)

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if kind is None:
            return
        url = self.url
        if isinstance(exc, TimeoutError):
            raise RequestFailed(f"no answer within the timeout from {url}", retry=True) from None
        if isinstance(exc, aiohttp.ClientConnectorError):
            raise RequestFailed(
                f"cannot connect to {url}: {exc.os_error}", retry=True, counts=False
            ) from None
        if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError):
            raise RequestFailed(
                f"connection to {url} lost: {exc or type(exc).__name__}", retry=True, counts=False
            ) from None
        if isinstance(exc, aiohttp.ClientPayloadError):
            raise RequestFailed(f"response from {url} cut short: {exc}", retry=True) from None
        if isinstance(exc, aiohttp.ClientError):
            raise RequestFailed(f"request to {url} failed: {exc}", retry=True) from None


def retry_delay(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from `Retry-After` (seconds) or `X-RateLimit-Reset` (epoch s or ms)."""
    value = headers.get("Retry-After")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
    value = headers.get("X-RateLimit-Reset")
    if value is not None:
        try:
            stamp = float(value)
        except ValueError:
            return None
        if stamp > 1e11:
            stamp /= 1000.0
        return max(0.0, stamp - (time.time() if now is None else now))
    return None


@dataclass(frozen=True, slots=True)
class BodyHead:
    """The first bytes of an error body, and how big the whole was.

    `size` is the whole body's size in bytes when known (read to its end, or declared by
    Content-Length), None when reading stopped at the bound with more to come: what the
    quote of a body that holds no readable message says it left out.
    """

    data: bytes
    size: int | None

    @classmethod
    def whole(cls, data: bytes) -> BodyHead:
        """A body read to its end."""
        return cls(data, len(data))


def error_message(body: BodyHead) -> str:
    """The human part of an error body: `{"error": {"message": ..}}` or else a quote of its
    head that says what it left out (a proxy's HTML page, a JSON body cut at the bound)."""
    try:
        parsed = orjson.loads(body.data)
    except orjson.JSONDecodeError:
        return quote_body(body.data, body.size)
    if body.size != len(body.data) and not isinstance(parsed, dict):
        return quote_body(body.data, body.size)  # a cut number or string that still parses
    return message_of(parsed)


def message_of(parsed: Any) -> str:
    """The human part of a parsed error: `{"error": {"message": ..}}`, `{"detail": ..}`, or
    the whole."""
    if isinstance(parsed, dict):
        error = parsed.get("error", parsed.get("detail", parsed))
        if isinstance(error, dict):
            return str(error.get("message", error))
        return str(error)
    return str(parsed)


def status_failure(
    status: int, body: BodyHead, headers: Mapping[str, str], key_hint: str | None = None
) -> RequestFailed:
    """What an HTTP error status means for the engine, the same for every API."""
    message = error_message(body)
    if status in (401, 403):
        return RequestFailed(
            f"HTTP {status}: {message}"
            + (f" (set {key_hint} to a valid API key)" if key_hint else ""),
            retry=False,
            status=status,
            kind=RequestFailed.AUTH,
        )
    if status == 402:
        return RequestFailed(
            f"HTTP 402 out of credits: {message}",
            retry=True,
            counts=False,
            status=status,
            kind=RequestFailed.PAYMENT,
        )
    if status == 429:
        return RequestFailed(
            f"HTTP 429 rate limited: {message}",
            retry=True,
            status=status,
            retry_after=retry_delay(headers),
            kind=RequestFailed.RATE,
        )
    if status >= 500 or status == 408:
        return RequestFailed(
            f"HTTP {status}: {message}", retry=True, status=status, retry_after=retry_delay(headers)
        )
    return RequestFailed(f"HTTP {status}: {message}", retry=False, status=status)


def json_body(raw: bytes) -> Any:
    """The parsed body of a whole (not streamed) answer; a body that is not JSON is a retry."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise RequestFailed("response body is not valid JSON", retry=True) from None


def typed(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """`obj[key]` when it has the type the protocol gives it (None when absent or null).

    Anything else is a retryable failure naming the field, so a server or proxy that sends
    `"choices": 5` costs one attempt with a reason, never a stray exception or a record
    built from the wrong thing.
    """
    value = obj.get(key)
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    shown = orjson.dumps(value)[:60].decode(errors="replace")
    raise RequestFailed(f"{where} has {key} of type {type(value).__name__}: {shown}", retry=True)


_DATA = b"data:"


def _event(payload: bytes, *, last: bool) -> dict[str, Any]:
    try:
        event = orjson.loads(payload)
    except orjson.JSONDecodeError:
        # Unterminated, it is most likely a cut, not a server speaking bad JSON.
        reason = "stream ended inside an event" if last else "stream event is not valid JSON"
        raise RequestFailed(reason, retry=True) from None
    if not isinstance(event, dict):
        raise RequestFailed("stream event is not a JSON object", retry=True)
    return event


async def sse_events(
    chunks: AsyncIterable[bytes], max_line: int | None = None
) -> AsyncGenerator[dict[str, Any], None]:
    """The JSON objects of a Server-Sent-Events body, one per `data:` line, until `[DONE]`.

    SGLang and every OpenAI-compatible server frame their streams alike; only what an event
    means differs, so that is left to the caller. Comments (OpenRouter's keep-alives), other
    fields and blank lines carry nothing and are skipped.

    A last line without its newline is taken when it is a whole JSON object, because some
    servers end that way; anything else there (half an object, half of `data:`) means the
    body was cut and what was lost cannot be known, so the attempt fails and is retried:
    a retry costs one request, a wrong record costs the data set.

    A line longer than `max_line` bytes fails the attempt as soon as it is: a server that
    never sends a newline would otherwise have the whole stream held in memory.
    """
    pending: list[bytes] = []  # the current unterminated line, in pieces: no quadratic join
    size = 0  # of `pending`, counted per piece
    async for piece in chunks:
        pending.append(piece)
        if b"\n" not in piece:
            size += len(piece)
            if max_line is not None and size > max_line:
                raise RequestFailed(f"stream event over {max_line:,} bytes", retry=True)
            continue
        lines = b"".join(pending).split(b"\n")
        tail = lines.pop()
        pending = [tail] if tail else []
        size = len(tail)
        for raw in lines:
            line = raw.strip()
            if not line.startswith(_DATA):
                continue
            payload = line[len(_DATA) :].strip()
            if payload == b"[DONE]":
                return
            yield _event(payload, last=False)
    line = b"".join(pending).strip()
    if not line:
        return
    if line.startswith(_DATA):
        payload = line[len(_DATA) :].strip()
        if payload != b"[DONE]":
            yield _event(payload, last=True)
    elif _DATA.startswith(line[: len(_DATA)]):
        raise RequestFailed("stream ended inside an event", retry=True)
