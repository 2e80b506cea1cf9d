"""Fault injection: which fault a request draws, and the ones that strike before generation.

A long run loses answers to 5xx, 429 (and 402 on a paid API), hangs, connection resets and
torn bodies; the simulator produces each on demand so clients can be tested against them. The
faults that strike mid-generation (`stream_error`, `torn_json`) are cut by the pipeline, which
knows how far the answer got.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
from collections.abc import Mapping
from typing import Protocol

from aiohttp import web

from gen_tui.backends.sim.config import Faults, SimConfig


class Refusing(Protocol):
    """What a refusal reads of the simulator (`pipeline.Simulator`)."""

    config: SimConfig
    fault_rng: random.Random
    closing: asyncio.Event


class Wording(Protocol):
    """How an API words a refusal (`pipeline.Frontend`)."""

    def error(self, status: int, message: str) -> web.Response: ...

    def limit_headers(self, config: SimConfig) -> Mapping[str, str]: ...


__all__ = ["HUGE_ERROR_CHARS", "draw", "huge_message", "refuse", "reset", "torn_response"]

HUGE_ERROR_CHARS = 1 << 20
"""How long the `huge_error` fault's message is: 16 times what a client reads of a body."""


def draw(rng: random.Random, faults: Faults, kinds: tuple[str, ...]) -> str | None:
    """The fault this request suffers, if any: each kind is drawn independently (so the draws
    stay the same whatever hits) and the first kind in FAULT_KINDS order wins."""
    hit: str | None = None
    for kind in kinds:
        probability = getattr(faults, kind)
        if probability > 0 and rng.random() < probability and hit is None:
            hit = kind
    return hit


async def refuse(
    request: web.Request, fault: str, sim: Refusing, api: Wording
) -> web.Response | None:
    """Faults that strike before any generation, worded by `api`; None for the ones that strike
    during it."""
    faults = sim.config.faults
    if fault == "rate_429":
        response = api.error(429, "Simulated rate limit, retry later")
        response.headers["Retry-After"] = _format_seconds(faults.retry_after_s)
        for name, value in api.limit_headers(sim.config).items():
            response.headers[name] = value
        return response
    if fault == "payment_402":
        return api.error(402, "Insufficient credits")
    if fault == "error_5xx":
        status = sim.fault_rng.choice((500, 503))
        return api.error(status, f"Simulated server error ({status})")
    if fault == "huge_error":
        return api.error(500, huge_message())
    if fault == "timeout":
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(faults.hang_s):
                await sim.closing.wait()
        reset(request)
        return web.Response(status=504)
    if fault == "reset":
        reset(request)
        return web.Response(status=500)
    return None


def huge_message() -> str:
    """The `huge_error` fault's message: a head that says what it is, then `E` to length."""
    head = f"Simulated huge error ({HUGE_ERROR_CHARS:,} characters): "
    return head + "E" * (HUGE_ERROR_CHARS - len(head))


def torn_response(body: bytes) -> web.Response:
    """A 200 whose JSON body stops half-way and whose connection then closes."""
    response = web.Response(body=body[: max(1, len(body) // 2)], content_type="application/json")
    response.force_close()
    return response


def reset(request: web.Request) -> None:
    """Drop the connection with a TCP RST, as a crashed server or a cut link does."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _format_seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
