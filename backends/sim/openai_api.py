"""OpenAI's `/v1` on the simulator: chat completions (plain and streamed) and the model list,
in the shapes OpenAI, OpenRouter and `transformers serve` answer with.

What an API provider adds is here: bearer-key auth, `usage` with OpenRouter's `cost`, 402 for
credits, 429 with `X-RateLimit-*`, the mid-stream error chunk, and each stream ending seen in
the wild (`SimConfig.openai_stream_end`). Slots, completions and faults are the shared
pipeline's, so a chat completion queues, paces and fails exactly like a /generate request.
"""

from __future__ import annotations

import hmac
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from gen_tui.backends.sim.completion import (
    BadRequest,
    Prompt,
    check_lengths,
    count_text_tokens,
    detokenize,
    flag,
    stop_candidates,
)
from gen_tui.backends.sim.config import FAULT_KINDS, SimConfig, cost, is_number
from gen_tui.backends.sim.pipeline import DONE, Frontend, Simulator, json_response, read_json, sse
from gen_tui.backends.sim.reasoning import reasoning_fields, reasoning_tokens
from gen_tui.backends.sim.slots import Job

__all__ = ["OPENROUTER_KEEPALIVE", "OpenAIApi", "openai_error", "usage"]

OPENROUTER_KEEPALIVE = b": OPENROUTER PROCESSING\n\n"


def openai_error(status: int, message: str) -> web.Response:
    """The error body OpenRouter sends (and OpenAI-style servers near enough): code = status."""
    return json_response({"error": {"message": message, "code": status}}, status=status)


def usage(config: SimConfig, job: Job, completion_tokens: int) -> dict[str, Any]:
    """OpenRouter's usage object; `cost` only when the simulator has a price."""
    prompt_tokens = job.prompt.prompt_tokens
    shown: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    billed = cost(config, prompt_tokens, completion_tokens)
    if billed is not None:
        shown["cost"] = billed
    shown["prompt_tokens_details"] = {"cached_tokens": 0}
    thought = min(completion_tokens, reasoning_tokens(config, job))
    shown["completion_tokens_details"] = {"reasoning_tokens": thought}
    return shown


def _chat_turn(message: object, index: int) -> tuple[str, str]:
    """(role, text) of one chat message; content may be a string, null or a list of text parts."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise BadRequest(f"messages[{index}] must be an object with a string role")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return message["role"], content or ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                raise BadRequest(f"messages[{index}].content: the simulator reads text parts only")
            texts.append(part["text"])
        return message["role"], "\n".join(texts)
    raise BadRequest(f"messages[{index}].content must be a string or a list of text parts")


@dataclass
class _Chat:
    """A valid /v1/chat/completions request: its prompt and how to answer it."""

    sim: Simulator
    prompt: Prompt
    id: str
    model: str
    created: int
    stream: bool
    include_usage: bool

    @property
    def prompts(self) -> list[Prompt]:
        return [self.prompt]

    def head(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def reply(self, results: list[tuple[Job, int]]) -> object:
        ((job, produced),) = results
        config = self.sim.config
        split = min(produced, reasoning_tokens(config, job))
        answer = detokenize(job.output_ids[split:produced], leading_space=False)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": answer if answer or not split else None,  # all thought: no answer
        }
        if split:
            thought = detokenize(job.output_ids[:split], leading_space=False)
            message.update(reasoning_fields(config.openai_reasoning, thought, whole=True))
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": job.reason(produced)["type"],
        }
        return {
            **self.head("chat.completion"),
            "choices": [choice],
            "usage": usage(self.sim.config, job, produced),
        }

    def writer(self, job: Job) -> _ChatStream:
        return _ChatStream(self, job)


class _ChatStream:
    """A chat completion stream: a role chunk, content chunks, then the configured ending."""

    def __init__(self, chat: _Chat, job: Job) -> None:
        config = chat.sim.config
        self._sim = chat.sim
        self._job = job
        self._include_usage = chat.include_usage
        self._ending = config.openai_stream_end
        self._keepalive = config.openai_keepalive
        # OpenAI: with include_usage every chunk before the usage chunk says "usage": null.
        self._usage_null = chat.include_usage and self._ending == "done"
        self._usage_on_last = chat.include_usage and self._ending in ("none", "usage_with_choices")
        self._head = chat.head("chat.completion.chunk")
        self._started = False
        self._produced = 0
        self._split: int | None = None
        """Tokens before this are reasoning, after it answer: set at the first frame, as the
        job's completion is planned only once it has a slot, and kept should the profile
        change while the stream runs."""

    def _chunk(self, delta: dict[str, Any], reason: str | None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        body = {**self._head, "choices": [choice], **extra}
        if self._usage_null:
            body.setdefault("usage", None)
        return sse(body)

    def _lead(self) -> list[bytes]:
        """The role chunk, before the first content of the stream."""
        if self._started:
            return []
        self._started = True
        return [self._chunk({"role": "assistant", "content": ""}, None)]

    def opening(self) -> list[bytes]:
        return [OPENROUTER_KEEPALIVE] if self._keepalive else []

    def frame(self, start: int, end: int, *, last: bool) -> list[bytes]:
        job = self._job
        events = self._lead()
        if self._split is None:
            self._split = reasoning_tokens(self._sim.config, job)
        split = self._split
        if start < split:  # reasoning first, in its own chunk, as servers send it
            thought = detokenize(job.output_ids[start : min(end, split)], leading_space=start > 0)
            shape = self._sim.config.openai_reasoning
            events.append(self._chunk(reasoning_fields(shape, thought, whole=False), None))
            if end <= split and not last:
                return events
        begin = max(start, split)
        text = detokenize(job.output_ids[begin:end], leading_space=begin > split)
        if not last:
            return [*events, self._chunk({"content": text}, None)]
        self._produced = end
        extra = {"usage": usage(self._sim.config, job, end)} if self._usage_on_last else {}
        return [*events, self._chunk({"content": text}, job.reason(end)["type"], **extra)]

    def failure(self, start: int, end: int) -> list[bytes]:
        """OpenRouter: a provider error after the 200 went out arrives as a last chunk with
        finish_reason "error" and an `error` field; then the stream ends."""
        events = self.frame(start, end, last=False) if end > start else self._lead()
        error = {"message": "Simulated rate limit in the middle of generation", "code": 429}
        return [*events, self._chunk({"content": ""}, "error", error=error)]

    def closing(self) -> list[bytes]:
        """The usage chunk, if asked and not already on the last chunk, then `[DONE]` (unless
        the stream just ends, as from `transformers serve`)."""
        events = []
        if self._include_usage and self._ending in ("done", "usage_no_choices"):
            shown = usage(self._sim.config, self._job, self._produced)
            choices: dict[str, Any] = {"choices": []} if self._ending == "done" else {}
            events.append(sse({**self._head, **choices, "usage": shown}))
        if self._ending != "none":
            events.append(DONE)
        return events


class OpenAIApi(Frontend):
    """`/v1/chat/completions` and `/v1/models`, on the simulator shared with /generate. The
    dataset (length profile) of a chat completion comes from the `X-Sim-Dataset` header."""

    fault_kinds = FAULT_KINDS

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/chat/completions", self.answer)
        router.add_get("/v1/models", self.list_models)

    async def list_models(self, request: web.Request) -> web.Response:
        denied = self.authorize(request)
        if denied is not None:
            return denied
        model = {
            "id": self.sim.config.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "sim",
            "max_model_len": self.sim.config.context_length,  # as vLLM and SGLang say it
        }
        return json_response({"object": "list", "data": [model]})

    # ---- the pipeline's hooks ------------------------------------------------------------------

    def authorize(self, request: web.Request) -> web.Response | None:
        """None when the request may pass: no key is set, or it brings `Bearer <api_key>`."""
        key = self.sim.config.api_key
        if key is None:
            return None
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            message = "No auth credentials found"
        elif hmac.compare_digest(
            token.encode("utf-8", "surrogateescape"), key.encode("utf-8", "surrogateescape")
        ):
            return None
        else:
            message = "Invalid API key"  # never echo what was sent: it may be a real key
        self.sim.stats.unauthorized += 1
        return openai_error(401, message)

    def error(self, status: int, message: str) -> web.Response:
        return openai_error(status, message)

    def limit_headers(self, config: SimConfig) -> dict[str, str]:
        """OpenRouter's rate-limit headers; the reset is in epoch milliseconds."""
        reset_ms = round((time.time() + config.faults.retry_after_s) * 1000)
        return {
            "X-RateLimit-Limit": str(config.slots),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(reset_ms),
        }

    async def parse(self, request: web.Request) -> _Chat:
        return self._parse_chat(await read_json(request), request.headers.get("X-Sim-Dataset", ""))

    def _parse_chat(self, payload: object, dataset: str) -> _Chat:
        """Validate a chat completion body (vLLM's checks, `transformers serve`'s model check)."""
        config = self.sim.config
        if not isinstance(payload, dict):
            raise BadRequest("The request body must be a JSON object")
        model = payload.get("model")
        if model is not None and not isinstance(model, str):
            raise BadRequest(f"model must be a string, got {model!r}")
        if config.strict_model and model != config.model_name:
            raise BadRequest(
                f"The model {model!r} is not served here; the only model is {config.model_name!r}"
            )
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list of {role, content} objects")
        turns = [_chat_turn(message, index) for index, message in enumerate(messages)]
        prompt_tokens = max(1, sum(count_text_tokens(text) for _, text in turns))
        name = "max_completion_tokens"
        if payload.get(name) is None:
            name = "max_tokens"
        cap = check_lengths(config.context_length, prompt_tokens, payload.get(name), name, 1)
        for knob, top in (("temperature", 2.0), ("top_p", 1.0)):
            value = payload.get(knob)
            if value is not None and not (is_number(value) and 0 <= value <= top):
                raise BadRequest(f"{knob} must be a number from 0 to {top:g}, got {value!r}")
        choices = payload.get("n")
        if choices is not None and (type(choices) is not int or choices != 1):
            raise BadRequest(f"The simulator answers n=1 only, got n={choices!r}")
        options = payload.get("stream_options")
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise BadRequest("stream_options must be an object")
        hex_id = uuid.uuid4().hex
        prompt = Prompt(
            rid=f"oa/{dataset}/{hex_id}",
            key=b"chat\0" + orjson.dumps(turns),
            prompt_tokens=prompt_tokens,
            # No cap means "up to the context", as on OpenAI-style servers.
            max_new_tokens=config.context_length - prompt_tokens if cap is None else cap,
            ignore_eos=flag(payload, "ignore_eos"),  # a vLLM / SGLang extension
            stop_candidates=stop_candidates(payload),
            dataset=dataset,
            chat=True,
        )
        return _Chat(
            sim=self.sim,
            prompt=prompt,
            id=f"chatcmpl-{hex_id}",
            model=model or config.model_name,
            created=int(time.time()),
            stream=flag(payload, "stream"),
            include_usage=flag(options, "include_usage"),
        )
