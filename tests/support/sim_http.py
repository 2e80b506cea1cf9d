"""Talking to the simulator over plain HTTP, as a client that knows nothing of gen-tui would:
SGLang's /generate and /abort_request, OpenAI's /v1/chat/completions, and /_sim/config.

Shared by the simulator's tests (tests/integration/test_sim_*.py), which check the wire
shapes themselves, so these helpers only send and decode; every check stays in the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from gen_tui.backends.sim import LengthProfile, SimServer

FAST = 1e7  # tokens/s: a simulator whose pacing never shows in a test's time

# ---- SGLang /generate -----------------------------------------------------------------------


async def generate(
    http: aiohttp.ClientSession, sim: SimServer, payload: Any, **kwargs: Any
) -> tuple[int, Any]:
    """One POST /generate: the status and the decoded JSON body (an error body included)."""
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


async def abort(http: aiohttp.ClientSession, sim: SimServer, **body: Any) -> None:
    """SGLang's POST /abort_request (by `rid`, or `abort_all`), which always answers 200."""
    async with http.post(sim.url + "/abort_request", json=body) as resp:
        assert resp.status == 200


async def reconfigure(sim: SimServer, patch: Mapping[str, Any]) -> None:
    """Change the running simulator's settings as `gen-tui sim`'s users do, by a partial
    config to POST /_sim/config (all of it applied, or a failed assertion with the reason)."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(sim.url + "/_sim/config", json=patch) as resp,
    ):
        assert resp.status == 200, await resp.text()


# ---- OpenAI /v1/chat/completions ------------------------------------------------------------

CHAT = "/v1/chat/completions"
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Write a sorting function, please."},
]
PROMPT_TOKENS = 11  # words and punctuation of both messages
# cv 0: every completion of the dataset is exactly `mean` tokens long.
TEN = {"T": LengthProfile(mean=10, cv=0.0)}
LONG = {"L": LengthProfile(mean=1e6, cv=0.0)}


def request(**extra: Any) -> dict[str, Any]:
    """A chat request body for MESSAGES, with `extra` fields added or overridden."""
    return {"model": "sim-model", "messages": MESSAGES, "max_tokens": 100, **extra}


async def chat(
    http: aiohttp.ClientSession,
    sim: SimServer,
    body: dict[str, Any],
    dataset: str | None = None,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> tuple[int, Any]:
    """One POST to CHAT (for `dataset`'s length profile, via X-Sim-Dataset): status and body."""
    headers = dict(headers or {})
    if dataset is not None:
        headers["X-Sim-Dataset"] = dataset
    async with http.post(sim.url + CHAT, json=body, headers=headers, **kwargs) as resp:
        return resp.status, orjson.loads(await resp.read())


async def stream_raw(
    http: aiohttp.ClientSession, sim: SimServer, body: dict[str, Any], dataset: str | None = None
) -> bytes:
    """The raw body of a streamed chat request (checked to be an event stream)."""
    headers = {"X-Sim-Dataset": dataset} if dataset is not None else {}
    async with http.post(sim.url + CHAT, json={**body, "stream": True}, headers=headers) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        return await resp.read()


def events_of(raw: bytes) -> list[Any]:
    """The `data:` payloads of a stream, JSON decoded (`[DONE]` kept as bytes, comments skipped)."""
    events: list[Any] = []
    for block in raw.split(b"\n\n"):
        if not block or block.startswith(b":"):
            continue
        assert block.startswith(b"data: ")
        data = block[len(b"data: ") :]
        events.append(data if data == b"[DONE]" else orjson.loads(data))
    return events


def sse(payload: object) -> bytes:
    """`payload` as one server-sent event, byte for byte as the simulator frames it."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def usage_of(prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    """The usage object an OpenAI-compatible server reports for these token counts."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        **extra,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
