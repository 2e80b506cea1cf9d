"""Client side of OpenAI-compatible `POST /v1/chat/completions` (OpenRouter, vLLM, SGLang's /v1,
`transformers serve`), streaming and not.

A thinking model's reasoning, sent apart from `content`, is kept in `Generation.reasoning`
(see `reasoning`); it counts against the same size bound as the answer.

Servers disagree on how a stream ends: `data: [DONE]` or nothing at all, usage in a final
chunk with or without `choices`, usage inside the last content chunk. All of them are
accepted. A chunk with `finish_reason: "error"` (OpenRouter's mid-stream failure) is a failed
attempt, never a record. The API key is redacted from every message this module produces.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import aclosing
from typing import Any

import aiohttp
import orjson

from gen_tui.backends.clients.base import ModelLimits, Progress, Request
from gen_tui.backends.clients.http import HttpClient, request_timeout
from gen_tui.backends.clients.limits import Limits, body, error_body, head, pieces
from gen_tui.backends.clients.models import models_limits
from gen_tui.backends.clients.reasoning import reasoning_of
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.clients.wire import (
    json_body,
    sse_events,
    status_failure,
    transport_errors,
    typed,
)

PASSED_SAMPLING = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "seed",
)
DATASET_HEADER = "X-Sim-Dataset"
"""Tells gen-tui's simulator which dataset (length profile) a chat belongs to. Sent only when
a client is made with `sim_dataset_header=True` (tests, benchmarks, the demo): a real
provider has no use for the run's dataset names, and they are the user's business."""


def request_body(
    model: str | None, messages: list[dict[str, str]], sampling: Mapping[str, Any], stream: bool
) -> dict[str, Any]:
    """Map SGLang-style sampling settings onto a chat completion request."""
    body: dict[str, Any] = {"messages": messages, "stream": stream}
    if model:
        body["model"] = model
    if "max_new_tokens" in sampling:
        body["max_tokens"] = int(sampling["max_new_tokens"])
    for key in PASSED_SAMPLING:
        if key in sampling:
            body[key] = sampling[key]
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


class _Redactor:
    def __init__(self, secret: str | None) -> None:
        self.secret = secret

    def __call__(self, text: str) -> str:
        return text.replace(self.secret, "***") if self.secret else text


def _usage(usage: Any) -> tuple[int | None, int | None, float | None]:
    if usage is None:
        return None, None, None
    if not isinstance(usage, dict):
        raise RequestFailed(f"the response has usage of type {type(usage).__name__}", retry=True)
    cost = usage.get("cost")  # a figure for the user, not data: a wrong one is just left out
    return (
        typed(usage, "prompt_tokens", int, "the response's usage"),
        typed(usage, "completion_tokens", int, "the response's usage"),
        float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
    )


def _content(container: dict[str, Any], where: str) -> str | None:
    """`content` as text: a string, or a list of parts whose text parts are joined (some
    servers send `[{"type": "text", "text": ..}]`). Parts of other types (images, a
    model's thinking) carry no answer text; anything else is a named failure."""
    value = container.get("content")
    if not isinstance(value, list):
        text: str | None = typed(container, "content", str, where)
        return text
    texts = []
    for part in value:
        if not isinstance(part, dict):
            raise RequestFailed(
                f"{where} has a content part of type {type(part).__name__}", retry=True
            )
        if part.get("type", "text") == "text":
            texts.append(typed(part, "text", str, f"{where}'s content part") or "")
    return "".join(texts)


def _choices(chunk: dict[str, Any], where: str) -> list[dict[str, Any]]:
    choices = typed(chunk, "choices", list, where) or []
    for choice in choices:
        if not isinstance(choice, dict):
            raise RequestFailed(f"{where} has a choice of type {type(choice).__name__}", retry=True)
    return choices


def _chunk_error(chunk: dict[str, Any], choices: list[dict[str, Any]]) -> RequestFailed | None:
    error = chunk.get("error")
    errored = any(c.get("finish_reason") == "error" for c in choices)
    if error is None and not errored:
        return None
    detail = error.get("message", error) if isinstance(error, dict) else error
    code = error.get("code") if isinstance(error, dict) else None
    return RequestFailed(
        f"error inside the stream: {detail or 'finish_reason error'}",
        retry=True,
        status=code if isinstance(code, int) else None,
        kind=RequestFailed.RATE if code == 429 else None,
    )


def _result(
    text: str, reasoning: str | None, finish: str | None, usage: Any, started: float
) -> Generation:
    if finish is None:
        raise RequestFailed("response ended without a finish_reason", retry=True)
    if finish == "error":
        raise RequestFailed("response finished with an error", retry=True)
    prompt, completion, cost = _usage(usage)
    if completion is None:
        raise RequestFailed(
            "response has no usage.completion_tokens (the budget counts them)", retry=False
        )
    return Generation(
        output_ids=None,
        text=text,
        prompt_tokens=prompt or 0,
        completion_tokens=completion,
        finish_reason=finish,
        latency_s=time.monotonic() - started,
        cost=cost,
        reasoning=reasoning or None,  # an empty trace is no trace: the record omits it
    )


async def _read_stream(
    response: aiohttp.ClientResponse,
    started: float,
    limits: Limits,
    url: str,
    progress: Progress | None = None,
) -> Generation:
    """Assemble a chat stream; the answer's length so far goes to `progress` per chunk.

    Chunks carry text, not token counts (usage comes at the end), so each chunk that
    adds text counts as one token: a lower bound, which is what `progress` promises (a
    server sends at least one token per chunk, often exactly one; a character split
    over tokens is held back until it is whole, so its delta is empty or longer).
    """
    parts: list[str] = []
    thoughts: list[str] = []
    kept = 0  # characters of answer and reasoning held: endless small events must not grow it
    chunks_with_text = 0
    finish: str | None = None
    usage: Any = None
    chunks = pieces(response, limits, url, cap=None, lines=True)
    async with aclosing(sse_events(chunks, limits.max_bytes)) as events:
        async for chunk in events:
            choices = _choices(chunk, "a stream chunk")
            failure = _chunk_error(chunk, choices)
            if failure is not None:
                raise failure
            for choice in choices:
                delta = typed(choice, "delta", dict, "a stream chunk's choice") or {}
                content = _content(delta, "a stream chunk's delta")
                thought = reasoning_of(delta, "a stream chunk's delta")
                if content or thought:
                    chunks_with_text += 1
                for held, piece in ((parts, content), (thoughts, thought)):
                    if piece:
                        held.append(piece)
                        kept += len(piece)
                if kept > limits.max_bytes:
                    raise limits.too_big()
                reason = typed(choice, "finish_reason", str, "a stream chunk's choice")
                if reason:
                    finish = reason
            if chunk.get("usage"):
                usage = chunk["usage"]
            if progress is not None:
                progress.produced = chunks_with_text
    generation = _result("".join(parts), "".join(thoughts), finish, usage, started)
    if progress is not None:
        progress.produced = generation.completion_tokens  # the exact count, at last
    return generation


def completion_of(payload: Any, started: float) -> Generation:
    """The generation a whole (not streamed) chat completion body holds, or RequestFailed
    naming what is wrong with it: the live path's and the batch output file's lines alike."""
    if not isinstance(payload, dict):
        raise RequestFailed("response is not a JSON object", retry=True)
    choices = _choices(payload, "the response")
    failure = _chunk_error(payload, choices)
    if failure is not None:
        raise failure
    choice = (choices or [{}])[0]
    message = typed(choice, "message", dict, "the response's choice") or {}
    text = _content(message, "the response's message")
    reasoning = reasoning_of(message, "the response's message")
    finish = typed(choice, "finish_reason", str, "the response's choice")
    return _result(text or "", reasoning, finish, payload.get("usage"), started)


async def chat(
    session: aiohttp.ClientSession,
    url: str,
    *,
    messages: list[dict[str, str]],
    sampling: Mapping[str, Any],
    model: str | None,
    api_key: str | None,
    key_hint: str,
    dataset: str | None = None,
    stream: bool = False,
    timeout_s: float = 3600.0,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> Generation:
    """Send one chat to `url`/v1/chat/completions and return its complete response
    (streamed, its length so far goes to `progress` as chunks arrive).

    `dataset`, when given, goes out in the simulator's `X-Sim-Dataset` header (see
    DATASET_HEADER); None sends nothing about the run but the chat itself.
    """
    redact = _Redactor(api_key)
    headers = {"Content-Type": "application/json"}
    if dataset is not None:
        headers[DATASET_HEADER] = dataset
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    limits = limits or Limits.for_sampling(sampling)
    data = orjson.dumps(request_body(model, messages, sampling, stream))
    timeout = request_timeout(timeout_s)
    started = time.monotonic()
    try:
        with transport_errors(url):
            async with session.post(
                f"{url}/v1/chat/completions", data=data, headers=headers, timeout=timeout
            ) as response:
                if response.status != 200:
                    raw = await error_body(response, limits, url)
                    raise status_failure(response.status, raw, response.headers, key_hint)
                if stream:
                    return await _read_stream(response, started, limits, url, progress)
                payload = json_body(await body(response, limits, url))
                return completion_of(payload, started)
    except RequestFailed as exc:
        exc.reason = redact(exc.reason)
        raise


async def check_reachable(session: aiohttp.ClientSession, url: str) -> str | None:
    """None if anything answers at `url`/v1/models (even 401: the key is checked per request)."""
    try:
        async with session.get(
            f"{url}/v1/models", timeout=aiohttp.ClientTimeout(total=10)
        ) as response:
            await head(response)  # what it says does not matter, only that it answers
            return None
    except aiohttp.ClientConnectorError as exc:
        return f"cannot connect to {url}: {exc.os_error}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"{url}/v1/models failed: {exc or type(exc).__name__}"


class OpenAIClient(HttpClient):
    """An OpenAI-compatible API: messages in, text out. It has no way to stop a request
    (closing the connection is all there is), so `can_abort` stays False."""

    def __init__(
        self,
        sampling: Mapping[str, Any],
        *,
        model: str | None,
        api_key: str | None,
        key_hint: str,
        stream: bool = False,
        timeout_s: float = 3600.0,
        limits: Limits | None = None,
        sim_dataset_header: bool = False,
    ) -> None:
        super().__init__(api_key)
        self.sampling = sampling
        self.model = model
        self.key_hint = key_hint
        self.stream = stream
        self.timeout_s = timeout_s
        self.limits = limits or Limits.for_sampling(sampling)
        self.sim_dataset_header = sim_dataset_header
        """Name each request's dataset to the simulator (off: real providers never see it)."""

    async def generate(
        self, url: str, request: Request, progress: Progress | None = None
    ) -> Generation:
        sampling = self.sampling
        if request.max_new_tokens is not None:
            sampling = {**sampling, "max_new_tokens": request.max_new_tokens}
        return await chat(
            self.session,
            url,
            messages=request.messages,
            sampling=sampling,
            model=self.model,
            api_key=self.secret,
            key_hint=self.key_hint,
            dataset=request.dataset if self.sim_dataset_header else None,
            stream=self.stream,
            timeout_s=self.timeout_s,
            limits=self.limits.for_tokens(request.max_new_tokens),
            progress=progress,
        )

    async def probe(self, url: str) -> str | None:
        return await check_reachable(self.session, url)

    async def model_limits(self, url: str) -> ModelLimits:
        headers = {"Authorization": f"Bearer {self.secret}"} if self.secret else None
        return await models_limits(self.session, url, self.model, headers)
