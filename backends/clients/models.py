"""What a server says about its model: the context length an answer must fit in.

Asked once at the start of a run, so the cap on each answer can come from the server
instead of a fixed guess (see answer_cap.py). Every server spells it its own way, and each
is read where it is documented or was seen:

- SGLang: `GET /get_server_info` has `context_length` only when set by its flag (null
  otherwise); `GET /v1/models` has `data[0].max_model_len` always (0.5.x).
- vLLM: `GET /v1/models` has `data[].max_model_len`.
- OpenRouter: `GET /v1/models` has `data[].context_length` and, per model,
  `top_provider.max_completion_tokens` (a provider's own cap on an answer).

What a server sends is untrusted: read bounded, and only a positive integer counts.
Anything else (no answer, an odd shape, a router that answers for itself) is "does not
say", never an error: the run then uses its fixed default and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from gen_tui.backends.clients.base import ModelLimits
from gen_tui.backends.clients.limits import head

MODELS_BYTES = 16 << 20
"""The most of /v1/models read: OpenRouter lists some hundreds of models (a few MB)."""
SERVER_INFO_BYTES = 1 << 20
"""The most of /get_server_info read (SGLang's is a few KB: its settings and a model's)."""


async def get_json(
    session: aiohttp.ClientSession,
    url: str,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """The JSON at `url` (GET, 10 s, at most `max_bytes`); None on any failure."""
    try:
        async with session.get(
            url, headers=headers, timeout=aiohttp.ClientTimeout(total=10)
        ) as response:
            if response.status != 200:
                return None
            raw = await head(response, max_bytes)
            return orjson.loads(raw) if raw is not None else None
    except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
        return None


def positive_int(value: Any) -> int | None:
    """`value` if it is a positive integer (JSON true is no count), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def limits_from_models(payload: Any, model: str | None) -> ModelLimits:
    """The limits of `model` (else the first model) in a /v1/models answer."""
    entries = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        return ModelLimits()
    models = [entry for entry in entries if isinstance(entry, dict)]
    chosen = next((entry for entry in models if model and entry.get("id") == model), None)
    if chosen is None:
        if model and len(models) > 1:
            return ModelLimits()  # a list of others says nothing about the one asked for
        chosen = models[0] if models else {}
    provider = chosen.get("top_provider")
    return ModelLimits(
        context_length=positive_int(chosen.get("max_model_len"))
        or positive_int(chosen.get("context_length")),
        max_completion_tokens=positive_int(provider.get("max_completion_tokens"))
        if isinstance(provider, dict)
        else None,
    )


async def models_limits(
    session: aiohttp.ClientSession,
    url: str,
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ModelLimits:
    """`model`'s limits from `url`/v1/models (every OpenAI-compatible server has it)."""
    return limits_from_models(
        await get_json(session, f"{url}/v1/models", MODELS_BYTES, headers), model
    )
