"""Client side of SGLang's native `/generate` API, streaming and not.

Every way a request can end is mapped to either a :class:`Generation` (a complete response)
or a :class:`RequestFailed` that says whether to retry and whether the attempt counts
against the sample's retry limit. The engine decides what to do; this module only speaks
the protocol.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from contextlib import aclosing
from typing import Any

import aiohttp
import orjson

from gen_tui.backends.clients.base import ModelLimits, Progress, Request, Worker
from gen_tui.backends.clients.http import JSON_HEADERS, HttpClient, request_timeout
from gen_tui.backends.clients.limits import Limits, body, error_body, head, pieces
from gen_tui.backends.clients.models import (
    SERVER_INFO_BYTES,
    get_json,
    models_limits,
    positive_int,
)
from gen_tui.backends.clients.results import Aborted, Generation, RequestFailed
from gen_tui.backends.clients.router import Routers
from gen_tui.backends.clients.wire import (
    json_body,
    message_of,
    sse_events,
    status_failure,
    transport_errors,
    typed,
)

__all__ = [
    "Aborted",
    "Generation",
    "RequestFailed",
    "SGLangClient",
    "abort",
    "check_health",
    "generate",
    "running_batch",
]


def finish_type(value: Any) -> tuple[str | None, str]:
    """(type, human detail) of a finish_reason in any shape SGLang or the seed produced."""
    if value is None:
        return None, ""
    if isinstance(value, str):
        return value, value
    if isinstance(value, dict):
        kind = value.get("type")
        detail = value.get("message") or value.get("matched") or value.get("length") or ""
        return (str(kind) if kind is not None else None), str(detail)
    return str(value), str(value)


def _generation(payload: Any, started: float, output_ids: list[int] | None = None) -> Generation:
    if not isinstance(payload, dict):
        raise RequestFailed("response is not a JSON object", retry=True)
    if "error" in payload and "meta_info" not in payload:
        raise RequestFailed(f"server error: {message_of(payload)}", retry=True)
    meta = payload.get("meta_info")
    if not isinstance(meta, dict):
        raise RequestFailed("response has no meta_info", retry=True)
    kind, detail = finish_type(meta.get("finish_reason"))
    if kind == "abort":
        raise Aborted(f"aborted by the server: {detail}")
    if kind is None:
        raise RequestFailed("response ended without a finish_reason", retry=True)
    ids = typed(payload, "output_ids", list, "the response") if output_ids is None else output_ids
    completion = typed(meta, "completion_tokens", int, "the response's meta_info")
    prompt = typed(meta, "prompt_tokens", int, "the response's meta_info")
    if ids is None or completion is None or prompt is None:
        raise RequestFailed("response lacks output_ids or token counts", retry=True)
    if len(ids) != completion:
        raise RequestFailed(
            f"response holds {len(ids)} output_ids but reports {completion} tokens", retry=True
        )
    return Generation(
        output_ids=ids,
        text=typed(payload, "text", str, "the response"),
        prompt_tokens=prompt,
        completion_tokens=completion,
        finish_reason=kind,
        latency_s=time.monotonic() - started,
    )


ID_BYTES = 8
"""What one id held counts against the response limit (about its JSON size)."""


async def _read_stream(
    response: aiohttp.ClientResponse,
    started: float,
    limits: Limits,
    url: str,
    progress: Progress | None = None,
) -> Generation:
    """Assemble a stream whose frames carry cumulative or, with --stream-output, new ids.

    A cumulative frame holds the whole answer so far, so the event bound caps it; new ids
    and text add up, so what they add up to is capped as well. After each frame the ids
    held so far go to `progress` (the answer is at least that long).
    """
    ids: list[int] = []
    texts: list[str] = []
    added = 0
    last: dict[str, Any] | None = None
    chunks = pieces(response, limits, url, cap=None, lines=True)
    async with aclosing(sse_events(chunks, limits.max_bytes)) as events:
        async for frame in events:
            if "error" in frame and "meta_info" not in frame:
                raise RequestFailed(f"stream error: {message_of(frame)}", retry=True)
            new = typed(frame, "output_ids", list, "a stream frame") or []
            text = typed(frame, "text", str, "a stream frame")
            meta = typed(frame, "meta_info", dict, "a stream frame") or {}
            total = typed(meta, "completion_tokens", int, "a stream frame's meta_info")
            if total is not None and len(new) == total:
                ids = list(new)
                texts = [text] if text is not None else []
            else:  # --stream-output: each frame holds only the new ids, and the new text
                ids.extend(new)
                added += len(new) * ID_BYTES
                if text is not None:
                    texts.append(text)
                    added += len(text)
                if added > limits.max_bytes:
                    raise limits.too_big()
            if progress is not None:
                progress.produced = len(ids)
            last = frame
    return _finish_stream(last, ids, "".join(texts) if texts else None, started)


def _finish_stream(
    last: dict[str, Any] | None, ids: list[int], text: str | None, started: float
) -> Generation:
    if last is None:
        raise RequestFailed("stream ended before any frame", retry=True)
    return dataclasses.replace(_generation(last, started, output_ids=ids), text=text)


async def generate(
    session: aiohttp.ClientSession,
    url: str,
    input_ids: list[int],
    sampling_params: dict[str, Any],
    rid: str,
    *,
    stream: bool = False,
    timeout_s: float = 3600.0,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> Generation:
    """Send one prompt to `url`/generate and return its complete response (streamed, the
    count so far goes to `progress` as frames arrive)."""
    limits = limits or Limits.for_sampling(sampling_params)
    data = orjson.dumps(
        {"input_ids": input_ids, "sampling_params": sampling_params, "rid": rid, "stream": stream}
    )
    started = time.monotonic()
    with transport_errors(url):
        async with session.post(
            f"{url}/generate", data=data, headers=JSON_HEADERS, timeout=request_timeout(timeout_s)
        ) as response:
            if response.status != 200:
                raw = await error_body(response, limits, url)
                raise status_failure(response.status, raw, response.headers)
            if stream:
                return await _read_stream(response, started, limits, url, progress)
            return _generation(json_body(await body(response, limits, url)), started)


async def abort(session: aiohttp.ClientSession, url: str, rid: str) -> None:
    """Ask the server to stop `rid` (best effort; SGLang answers 200 even for unknown rids)."""
    try:
        async with session.post(
            f"{url}/abort_request",
            data=orjson.dumps({"rid": rid, "abort_all": False}),
            headers=JSON_HEADERS,
            timeout=aiohttp.ClientTimeout(total=3),
        ) as response:
            await head(response)
    except (aiohttp.ClientError, TimeoutError):
        pass


async def check_health(session: aiohttp.ClientSession, url: str) -> str | None:
    """None if `url` answers /health with 200, else why not."""
    try:
        async with session.get(f"{url}/health", timeout=aiohttp.ClientTimeout(total=5)) as resp:
            if resp.status == 200:
                return None
            return f"{url}/health answered HTTP {resp.status}"
    except aiohttp.ClientConnectorError as exc:
        return f"cannot connect to {url}: {exc.os_error}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"{url}/health failed: {exc or type(exc).__name__}"


async def running_batch(session: aiohttp.ClientSession, url: str) -> int | None:
    """The server's `max_running_requests` from /get_server_info, if it says (best effort:
    SGLang leaves it null when it sizes the batch itself, and a router may not answer)."""
    info = await get_json(session, f"{url}/get_server_info", SERVER_INFO_BYTES)
    return positive_int(info.get("max_running_requests")) if isinstance(info, dict) else None


async def server_limits(session: aiohttp.ClientSession, url: str) -> ModelLimits:
    """The context length SGLang serves: `context_length` from /get_server_info when its
    flag set it (null otherwise), else `max_model_len` from /v1/models (always there)."""
    info = await get_json(session, f"{url}/get_server_info", SERVER_INFO_BYTES)
    context = positive_int(info.get("context_length")) if isinstance(info, dict) else None
    if context is not None:
        return ModelLimits(context_length=context)
    return await models_limits(session, url)


class SGLangClient(HttpClient):
    """SGLang's native API: token ids in, ids out; a request can be aborted by its rid.

    A URL may be SGLang's router rather than a server (see router.py): requests go through
    it as through one server, but aborts, capacity and context length are asked of each of
    its workers, because the router does not pass those on.
    """

    can_abort = True
    needs_input_ids = True

    def __init__(
        self,
        sampling: dict[str, Any],
        *,
        stream: bool = False,
        timeout_s: float = 3600.0,
        secret: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        super().__init__(secret)
        self.sampling = sampling
        self.stream = stream
        self.timeout_s = timeout_s
        self.limits = limits or Limits.for_sampling(sampling)
        self.routers = Routers()

    async def generate(
        self, url: str, request: Request, progress: Progress | None = None
    ) -> Generation:
        assert request.input_ids is not None
        sampling = self.sampling
        if request.max_new_tokens is not None:
            sampling = {**sampling, "max_new_tokens": request.max_new_tokens}
        return await generate(
            self.session,
            url,
            request.input_ids,
            sampling,
            request.rid,
            stream=self.stream,
            timeout_s=self.timeout_s,
            limits=self.limits.for_tokens(request.max_new_tokens),
            progress=progress,
        )

    async def probe(self, url: str) -> str | None:
        return await check_health(self.session, url)

    async def workers(self, url: str) -> tuple[Worker, ...] | None:
        return await self.routers.workers(self.session, url)

    async def capacity(self, url: str) -> int | None:
        """A server's running batch; behind a router, the sum of its healthy workers' (None
        when any of them does not say: a part of a sum is no capacity)."""
        workers = await self.workers(url)
        if workers is None:
            return await running_batch(self.session, url)
        healthy = [worker.url for worker in workers if worker.healthy]
        batches = await asyncio.gather(*(running_batch(self.session, w) for w in healthy))
        if not batches or None in batches:
            return None
        return sum(batch for batch in batches if batch is not None)

    async def model_limits(self, url: str) -> ModelLimits:
        """A server's context length; behind a router, the smallest its workers serve (a
        request may go to any of them)."""
        workers = await self.workers(url)
        if not workers:
            return await server_limits(self.session, url)
        said = await asyncio.gather(*(server_limits(self.session, w.url) for w in workers))
        contexts = [limits.context_length for limits in said if limits.context_length]
        return ModelLimits(context_length=min(contexts, default=None))

    async def abort(self, url: str, rid: str) -> None:
        """Abort `rid` at `url`; behind a router, at each of its workers, since the router
        answers /abort_request with 404 and only the worker running `rid` knows it."""
        workers = await self.workers(url)
        targets = [worker.url for worker in workers] if workers else [url]
        await asyncio.gather(*(abort(self.session, target, rid) for target in targets))
