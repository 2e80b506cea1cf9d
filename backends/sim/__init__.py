"""A stand-in for an SGLang server: the native `/generate` protocol without a GPU.

The demo, the tests and the benchmarks need a server that answers exactly like SGLang 0.5.x
(validation, response and stream shapes, aborts, batch slots that queue and pace work) and that
can be told to misbehave (5xx, 429, hangs, resets, torn bodies) on demand. Completions are
deterministic per prompt, so a resumed or retried run can be checked against a straight one.

It also speaks OpenAI's `POST /v1/chat/completions` (and `GET /v1/models`) on the same slots,
completions and faults, with what OpenRouter and `transformers serve` add: bearer-key auth,
`usage.cost`, 402 for credits, 429 with `X-RateLimit-Reset`, the mid-stream error chunk, and each
stream ending seen in the wild (`SimConfig.openai_stream_end`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import dataclasses
import hashlib
import hmac
import math
import os
import random
import re
import signal
import socket
import struct
import sys
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn, TypeGuard

import orjson
from aiohttp import web

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "EOS_TOKEN_ID",
    "FAULT_KINDS",
    "OPENAI_STREAM_ENDS",
    "Faults",
    "LengthProfile",
    "SimConfig",
    "SimServer",
    "SimStats",
    "apply_config_patch",
    "create_app",
    "main",
]

EOS_TOKEN_ID = 2
FIRST_TOKEN_ID = 3
DEFAULT_VOCAB_SIZE = 32000
DEFAULT_MAX_NEW_TOKENS = 128
SIM_VERSION = "0.5.x-sim"
# Precedence when several faults are drawn for the same request.
FAULT_KINDS = (
    "reset",
    "timeout",
    "rate_429",
    "payment_402",
    "error_5xx",
    "stream_error",
    "torn_json",
)
# `payment_402` is an API provider's answer (credits); SGLang's /generate never gives it.
_GENERATE_FAULTS = tuple(kind for kind in FAULT_KINDS if kind != "payment_402")
# How a /v1/chat/completions stream ends, as different servers do it:
#   done               OpenAI, vLLM, SGLang, OpenRouter: usage (if asked) in a chunk with
#                      "choices": [], every earlier chunk "usage": null, then `data: [DONE]`;
#   none               transformers serve: usage on the last chunk that still has choices, and no
#                      `[DONE]`: the stream just ends;
#   usage_with_choices usage on the last content chunk (the one with finish_reason), `[DONE]`;
#   usage_no_choices   a separate usage chunk without a "choices" key at all, then `[DONE]`.
OPENAI_STREAM_ENDS = ("done", "none", "usage_with_choices", "usage_no_choices")
OPENROUTER_KEEPALIVE = b": OPENROUTER PROCESSING\n\n"

_MAX_TOKEN_ID = 2**31
_CLIENT_MAX_SIZE = 256 * 2**20
_TEXT_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORDS = (
    "the", "model", "returns", "a", "short", "answer", "with", "some", "code", "and", "text",
    "for", "each", "input", "value", "list", "of", "items", "in", "order", "then", "it",
    "checks", "that", "result", "is", "correct", "before", "writing", "output", "to", "file",
    "function", "class", "method", "data", "set", "test", "case", "loop", "over", "range",
    "return", "error", "when", "empty", "string", "number", "count", "tokens", "index", "key",
    "map", "sum", "total", "step", "next", "line", "print", "call", "new", "old", "true", "false",
)  # fmt: skip


@dataclass
class LengthProfile:
    """Completion lengths of one dataset.

    Lognormal because real completion lengths are: most answers are short and a few run to the
    token limit, and that right tail is what budgets and in-flight overshoot must absorb.
    """

    mean: float
    cv: float = 0.95

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _check_number(self.mean, "profile mean", positive=True)
        _check_number(self.cv, "profile cv")

    def draw(self, rng: random.Random) -> int:
        sigma2 = math.log1p(self.cv * self.cv)
        mu = math.log(self.mean) - sigma2 / 2
        return max(1, round(rng.lognormvariate(mu, math.sqrt(sigma2))))


@dataclass
class Faults:
    """Per-request fault probabilities, drawn independently on every attempt.

    Every kind is a way a long run really loses answers, and a client must tell each one from a
    finished answer. `stream_error` is the only one on a healthy connection: the generation fails
    half-way, which a stream reports as `data: {"error": ..}` then `[DONE]` (as SGLang does) and
    a plain request as HTTP 500. A torn stream ends cleanly after a cut frame without `[DONE]`,
    like a stream from a server that never sends `[DONE]` except for the broken last line.

    On /v1/chat/completions the same kinds take OpenRouter's shapes: a 429 also carries
    `X-RateLimit-Reset` (epoch milliseconds), `stream_error` is a 200 stream whose last chunk has
    `finish_reason: "error"` and an `error` field with code 429, and `payment_402` answers 402
    "Insufficient credits" (drawn only there: /generate never sees it).
    """

    error_5xx: float = 0.0
    rate_429: float = 0.0
    payment_402: float = 0.0
    retry_after_s: float = 1.0
    timeout: float = 0.0
    hang_s: float = 3600.0
    reset: float = 0.0
    torn_json: float = 0.0
    stream_error: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for kind in FAULT_KINDS:
            value = getattr(self, kind)
            if not _is_number(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"fault {kind} must be a probability in [0, 1], got {value!r}")
        _check_number(self.retry_after_s, "retry_after_s")
        _check_number(self.hang_s, "hang_s")


@dataclass
class SimConfig:
    """Everything that shapes the simulated server; read live, so edits apply to new requests."""

    slots: int = 64
    tokens_per_s: float = 200.0
    prefill_s: float = 0.0
    vocab_size: int | None = None
    context_length: int = 32768
    profiles: dict[str, LengthProfile] = field(default_factory=dict)
    default_profile: LengthProfile = field(default_factory=lambda: LengthProfile(mean=600.0))
    faults: Faults = field(default_factory=Faults)
    seed: int = 0
    stream_output: bool = False
    frame_tokens: int = 8
    model_path: str = "gen-tui/simulated-model"
    # /v1/chat/completions only:
    model_name: str = "sim-model"  # echoed when a request names no model; /v1/models lists it
    strict_model: bool = False  # refuse (400) any other `model`, as `transformers serve` does
    api_key: str | None = field(default=None, repr=False)  # require `Authorization: Bearer ..`
    cost_per_million: tuple[float, float] | None = None  # ($/M input, $/M output) -> usage.cost
    openai_stream_end: str = "done"  # one of OPENAI_STREAM_ENDS
    openai_keepalive: bool = False  # open each stream with `: OPENROUTER PROCESSING` (a comment)

    def validate(self) -> None:
        """Raise ValueError naming the first bad field: a config is checked before it is live."""
        _check_int(self.slots, "slots", 1)
        _check_int(self.context_length, "context_length", 2)
        _check_int(self.frame_tokens, "frame_tokens", 1)
        _check_int(self.seed, "seed", None)
        if self.vocab_size is not None:
            _check_int(self.vocab_size, "vocab_size", FIRST_TOKEN_ID + 1)
        _check_number(self.tokens_per_s, "tokens_per_s", positive=True)
        _check_number(self.prefill_s, "prefill_s")
        if not isinstance(self.stream_output, bool):
            raise ValueError(f"stream_output must be true or false, got {self.stream_output!r}")
        if not isinstance(self.model_path, str) or not self.model_path:
            raise ValueError(f"model_path must be a non-empty string, got {self.model_path!r}")
        if not isinstance(self.model_name, str) or not self.model_name:
            raise ValueError(f"model_name must be a non-empty string, got {self.model_name!r}")
        for name in ("strict_model", "openai_keepalive"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key):
            raise ValueError("api_key must be a non-empty string or None")  # never echo it
        if self.cost_per_million is not None:
            cost = self.cost_per_million
            if not isinstance(cost, tuple) or len(cost) != 2:
                raise ValueError(f"cost_per_million must be (input, output) $/M, got {cost!r}")
            _check_number(cost[0], "cost_per_million input")
            _check_number(cost[1], "cost_per_million output")
        if self.openai_stream_end not in OPENAI_STREAM_ENDS:
            raise ValueError(
                f"openai_stream_end must be one of {', '.join(OPENAI_STREAM_ENDS)}, "
                f"got {self.openai_stream_end!r}"
            )
        if not isinstance(self.profiles, dict):
            raise ValueError("profiles must map dataset names to LengthProfile")
        for name, profile in self.profiles.items():
            if not isinstance(name, str) or not isinstance(profile, LengthProfile):
                raise ValueError(f"profiles[{name!r}] must be a LengthProfile")
            profile.validate()
        if not isinstance(self.default_profile, LengthProfile):
            raise ValueError("default_profile must be a LengthProfile")
        self.default_profile.validate()
        if not isinstance(self.faults, Faults):
            raise ValueError("faults must be a Faults")
        self.faults.validate()


@dataclass
class SimStats:
    """Counters the tests and the demo read to see what the server lived through.

    `in_flight` requests hold a slot, `queued` ones wait for one. `aborted` counts abort_request
    and client disconnects (`disconnected` is the latter part); `rejected` counts HTTP 400s;
    `total_completion_tokens` counts only completed answers, the ones a client can record, and
    `total_cost` what they were billed (chat completions with `cost_per_million` set).
    `unauthorized` counts 401s. Chat completions count in the same fields, with rids
    `oa/<dataset>/<hex>`.
    """

    requests: int = 0
    completed: int = 0
    aborted: int = 0
    disconnected: int = 0
    rejected: int = 0
    faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAULT_KINDS, 0))
    in_flight: int = 0
    queued: int = 0
    max_in_flight: int = 0
    total_completion_tokens: int = 0
    total_cost: float = 0.0
    unauthorized: int = 0
    completed_rids: list[str] = field(default_factory=list)


def apply_config_patch(config: SimConfig, patch: Mapping[str, Any]) -> None:
    """Apply a JSON-shaped partial config in place, all or nothing.

    In place because the server and its owner share one SimConfig object; all or nothing so a
    bad patch cannot leave the server half-changed. Raises ValueError for unknown keys or values.
    """
    if not isinstance(patch, Mapping):
        raise ValueError("the config patch must be a JSON object")
    candidate = copy.deepcopy(config)
    for key, value in patch.items():
        if key == "faults":
            if not isinstance(value, Mapping):
                raise ValueError("faults must be an object")
            for name, number in value.items():
                if name not in _FAULT_FIELDS:
                    raise ValueError(f"unknown fault setting {name!r}")
                setattr(candidate.faults, name, _patch_number(number, f"faults.{name}"))
        elif key == "profiles":
            if not isinstance(value, Mapping):
                raise ValueError("profiles must be an object")
            for name, profile in value.items():
                if profile is None:
                    candidate.profiles.pop(name, None)
                else:
                    candidate.profiles[str(name)] = _profile_from_json(profile, f"profiles.{name}")
        elif key == "default_profile":
            candidate.default_profile = _profile_from_json(value, key)
        elif key in ("tokens_per_s", "prefill_s"):
            setattr(candidate, key, _patch_number(value, key))
        elif key in ("slots", "context_length", "frame_tokens", "seed"):
            setattr(candidate, key, _patch_int(value, key))
        elif key == "vocab_size":
            candidate.vocab_size = None if value is None else _patch_int(value, key)
        elif key in ("stream_output", "strict_model", "openai_keepalive"):
            if not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false")
            setattr(candidate, key, value)
        elif key in ("model_path", "model_name", "api_key", "openai_stream_end"):
            setattr(candidate, key, value)
        elif key == "cost_per_million":
            candidate.cost_per_million = _cost_from_json(value)
        else:
            raise ValueError(f"unknown config key {key!r}")
    candidate.validate()
    for item in fields(SimConfig):
        if item.name != "faults":
            setattr(config, item.name, getattr(candidate, item.name))
    for item in fields(Faults):
        setattr(config.faults, item.name, getattr(candidate.faults, item.name))


_FAULT_FIELDS = frozenset(item.name for item in fields(Faults))


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_number(value: object, name: str, *, positive: bool = False) -> None:
    if not (_is_number(value) and math.isfinite(value) and value >= 0 and (value or not positive)):
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"{name} must be a {kind} number, got {value!r}")


def _check_int(value: object, name: str, minimum: int | None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")


def _patch_number(value: object, name: str) -> float:
    if not _is_number(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _patch_int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return value


def _cost_from_json(value: object) -> tuple[float, float] | None:
    if value is None:
        return None
    if isinstance(value, list | tuple) and len(value) == 2:
        return (
            _patch_number(value[0], "cost_per_million input"),
            _patch_number(value[1], "cost_per_million output"),
        )
    raise ValueError(
        f"cost_per_million must be [input, output] $ per million or null, got {value!r}"
    )


def _config_json(config: SimConfig) -> dict[str, Any]:
    """The config as JSON for the info endpoints, with the API key masked: it is a secret."""
    shown = dataclasses.asdict(config)
    if config.api_key is not None:
        shown["api_key"] = "***"
    return shown


def _profile_from_json(value: object, name: str) -> LengthProfile:
    if _is_number(value):
        return LengthProfile(mean=float(value))
    if isinstance(value, Mapping) and set(value) <= {"mean", "cv"} and "mean" in value:
        return LengthProfile(
            mean=_patch_number(value["mean"], f"{name}.mean"),
            cv=_patch_number(value.get("cv", 0.95), f"{name}.cv"),
        )
    raise ValueError(f"{name} must be a mean or an object {{'mean': .., 'cv': ..}}, got {value!r}")


class _BadRequest(Exception):
    """A request the real server refuses with HTTP 400; the message is what the client sees."""


@dataclass
class _Prompt:
    rid: str
    key: bytes
    prompt_tokens: int
    max_new_tokens: int | None
    ignore_eos: bool
    stop_candidates: list[int | str]
    dataset: str = ""  # picks the length profile: the rid prefix, or X-Sim-Dataset on /v1
    chat: bool = False  # a /v1/chat/completions request: billed when a price is set


def _dataset_of(rid: str) -> str:
    return rid.split("/", 1)[0] if "/" in rid else ""


def _plan(config: SimConfig, prompt: _Prompt) -> tuple[list[int], dict[str, Any]]:
    """The completion a prompt gets: seeded by (seed, dataset, prompt) alone, never by the rid's
    unique part or by max_new_tokens, so a retry or a resumed run sees the same answer and a
    tighter cap only truncates it."""
    dataset = prompt.dataset
    profile = config.profiles.get(dataset, config.default_profile)
    digest = hashlib.blake2b(f"{config.seed}\0{dataset}\0".encode() + prompt.key, digest_size=16)
    seed = int.from_bytes(digest.digest(), "big")
    rng = random.Random(seed)
    natural = profile.draw(rng)
    cap = DEFAULT_MAX_NEW_TOKENS if prompt.max_new_tokens is None else prompt.max_new_tokens
    cap = min(cap, config.context_length - prompt.prompt_tokens)
    length = cap if prompt.ignore_eos else min(natural, cap)
    vocab = config.vocab_size or DEFAULT_VOCAB_SIZE
    output_ids = rng.choices(range(FIRST_TOKEN_ID, vocab), k=length)
    if prompt.ignore_eos or natural >= cap:
        return output_ids, {"type": "length", "length": cap}
    matched = prompt.stop_candidates[seed % len(prompt.stop_candidates)]
    return output_ids, {"type": "stop", "matched": matched}


def _count_text_tokens(text: str) -> int:
    """The simulator's tokenizer for text: words and punctuation marks."""
    return len(_TEXT_TOKEN.findall(text))


def _flag(params: Mapping[str, Any], name: str) -> bool:
    value = params.get(name, False)
    if not isinstance(value, bool):
        raise _BadRequest(f"{name} must be true or false, got {value!r}")
    return value


def _detokenize(ids: list[int], leading_space: bool) -> str:
    text = " ".join([_WORDS[token % len(_WORDS)] for token in ids])
    return " " + text if leading_space and text else text


@dataclass
class _Chat:
    """A /v1/chat/completions request: its prompt and how to answer it."""

    prompt: _Prompt
    id: str
    model: str
    created: int
    stream: bool
    include_usage: bool

    def head(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}


def _chat_turn(message: object, index: int) -> tuple[str, str]:
    """(role, text) of one chat message; content may be a string, null or a list of text parts."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise _BadRequest(f"messages[{index}] must be an object with a string role")
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
                raise _BadRequest(f"messages[{index}].content: the simulator reads text parts only")
            texts.append(part["text"])
        return message["role"], "\n".join(texts)
    raise _BadRequest(f"messages[{index}].content must be a string or a list of text parts")


class _Job:
    """One prompt's life on the server: queued, decoding in a slot, then done."""

    def __init__(self, prompt: _Prompt, received: float) -> None:
        self.prompt = prompt
        self.rid = prompt.rid
        self.received = received
        self.abort_event = asyncio.Event()
        self.waiter: asyncio.Future[bool] | None = None
        self.state = "new"
        self.decode_start = 0.0
        self.free_at: float | None = None
        """When the model says its slot came free (its last token's time), if it ran out."""
        self.tokens_per_s = 1.0
        self.output_ids: list[int] = []
        self.finish_reason: dict[str, Any] = {}
        self.settled = False

    @property
    def aborted(self) -> bool:
        return self.abort_event.is_set()

    def produced(self, now: float) -> int:
        """Tokens decoded by `now`, which is what an aborted request hands back."""
        if self.state != "running":
            return 0
        decoded = int((now - self.decode_start) * self.tokens_per_s)
        return min(len(self.output_ids), max(0, decoded))

    async def sleep_until(self, deadline: float) -> bool:
        """Sleep until `deadline` unless aborted first; True means aborted."""
        if self.abort_event.is_set():
            return True
        delay = deadline - asyncio.get_running_loop().time()
        if delay <= 0:
            return False
        try:
            async with asyncio.timeout(delay):
                await self.abort_event.wait()
        except TimeoutError:
            return self.abort_event.is_set()
        return True

    def reason(self, produced: int) -> dict[str, Any]:
        if self.state == "aborted_in_queue":
            return _abort_reason("Abort in waiting queue")
        if self.aborted and produced < len(self.output_ids):
            return _abort_reason("Aborted")
        return self.finish_reason


def _abort_reason(message: str) -> dict[str, Any]:
    """SGLang's FINISH_ABORT for a user abort: no status code, so clients can tell it from the
    scheduler's own 4xx/5xx aborts."""
    return {"type": "abort", "message": message, "status_code": None, "err_type": None}


class _Slots:
    """FIFO admission to the batch slots.

    Not an asyncio.Semaphore because the capacity follows `config.slots` live and because an
    abort must be able to pull a request out of the queue with a clean "not admitted" answer.
    """

    def __init__(self, sim: _Simulator) -> None:
        self._sim = sim
        self._waiting: deque[_Job] = deque()

    async def acquire(self, job: _Job) -> bool:
        """Wait for a slot; False when the job was aborted before it got one."""
        if job.aborted:
            job.state = "aborted_in_queue"
            return False
        stats = self._sim.stats
        if not self._waiting and stats.in_flight < self._sim.config.slots:
            self._admit(job)
            return True
        job.waiter = asyncio.get_running_loop().create_future()
        job.state = "queued"
        self._waiting.append(job)
        stats.queued += 1
        try:
            return await job.waiter
        except asyncio.CancelledError:
            self._leave_queue(job, "done")
            raise

    def withdraw(self, job: _Job) -> None:
        if job.state == "queued" and job.waiter is not None and not job.waiter.done():
            self._leave_queue(job, "aborted_in_queue")
            job.waiter.set_result(False)

    def release(self, job: _Job) -> None:
        if job.state == "running":
            self._sim.stats.in_flight -= 1
            job.state = "done"
            now = asyncio.get_running_loop().time()
            self.wake(now if job.free_at is None else min(now, job.free_at))
        elif job.state == "queued":
            self._leave_queue(job, "done")

    def wake(self, free_at: float | None = None) -> None:
        """Admit queued jobs into free slots.

        `free_at` is when the model freed the slot: the next job decodes from then (or from
        its own arrival, if later), not from whenever this process got round to it. Under
        load the event loop is late by milliseconds per request; counted as idle slot time,
        that lag would make the simulated capacity fall short of slots x tokens/s.
        """
        stats = self._sim.stats
        while self._waiting and stats.in_flight < self._sim.config.slots:
            job = self._waiting.popleft()
            stats.queued -= 1
            job.state = "done"
            if job.waiter is not None and not job.waiter.done():
                self._admit(job, free_at)
                job.waiter.set_result(True)

    def _leave_queue(self, job: _Job, state: str) -> None:
        if job.state == "queued":
            self._waiting.remove(job)
            self._sim.stats.queued -= 1
            job.state = state

    def _admit(self, job: _Job, free_at: float | None = None) -> None:
        config = self._sim.config
        stats = self._sim.stats
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        job.state = "running"
        job.output_ids, job.finish_reason = _plan(config, job.prompt)
        job.tokens_per_s = config.tokens_per_s
        now = asyncio.get_running_loop().time()
        start = now if free_at is None else min(now, max(free_at, job.received))
        job.decode_start = start + config.prefill_s


def _json_response(payload: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def _error_response(status: int, message: str) -> web.Response:
    return _json_response({"error": {"message": message}}, status=status)


def _openai_error(status: int, message: str) -> web.Response:
    """The error body OpenRouter sends (and OpenAI-style servers near enough): code = status."""
    return _json_response({"error": {"message": message, "code": status}}, status=status)


def _torn_response(body: bytes) -> web.Response:
    """A 200 whose JSON body stops half-way and whose connection then closes."""
    response = web.Response(body=body[: max(1, len(body) // 2)], content_type="application/json")
    response.force_close()
    return response


def _sse(payload: object) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _cost(config: SimConfig, prompt_tokens: int, completion_tokens: int) -> float | None:
    if config.cost_per_million is None:
        return None
    per_input, per_output = config.cost_per_million
    return round((prompt_tokens * per_input + completion_tokens * per_output) / 1e6, 12)


def _format_seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


class _Simulator:
    """The server's state and its HTTP handlers, kept in the aiohttp app under `_SIM`."""

    def __init__(self, config: SimConfig) -> None:
        config.validate()
        self.config = config
        self.stats = SimStats()
        self.slots = _Slots(self)
        self.jobs: dict[str, set[_Job]] = {}
        self.fault_rng = random.Random(config.seed)
        self.closing = asyncio.Event()
        self.shutting_down = False

    def begin_shutdown(self) -> None:
        """Refuse health checks, abort everything and end hangs, so shutdown is prompt."""
        self.shutting_down = True
        self.closing.set()
        self.abort(None, abort_all=True)

    async def on_shutdown(self, _app: web.Application) -> None:
        self.begin_shutdown()

    def abort(self, rid: str | None, *, abort_all: bool = False) -> None:
        if abort_all:
            targets = [job for jobs in self.jobs.values() for job in jobs]
        else:
            targets = list(self.jobs.get(rid, ())) if isinstance(rid, str) else []
        for job in targets:
            job.abort_event.set()
            self.slots.withdraw(job)

    def reconfigure(self, patch: Mapping[str, Any]) -> None:
        apply_config_patch(self.config, patch)
        self.slots.wake()

    # ---- /generate ---------------------------------------------------------------------------

    async def generate(self, request: web.Request) -> web.StreamResponse:
        received = asyncio.get_running_loop().time()
        self.stats.requests += 1
        try:
            if request.content_type != "application/json":
                raise _BadRequest(
                    f"Content-Type must be application/json, got {request.content_type!r}"
                )
            try:
                payload = orjson.loads(await request.read())
            except orjson.JSONDecodeError as exc:
                raise _BadRequest(f"Invalid JSON body: {exc}") from None
            prompts, stream, batch = self._parse(payload)
        except _BadRequest as exc:
            self.stats.rejected += 1
            return _error_response(400, str(exc))

        fault = self._draw_fault(_GENERATE_FAULTS)
        if fault is not None:
            self.stats.faults[fault] += 1
            refusal = await self._early_fault(request, fault)
            if refusal is not None:
                return refusal

        jobs = [_Job(prompt, received) for prompt in prompts]
        for job in jobs:
            self.jobs.setdefault(job.rid, set()).add(job)
        if stream:
            return await self._stream(request, jobs[0], fault)
        cut = fault == "stream_error"
        results = await asyncio.gather(*(self._decode(job, half=cut) for job in jobs))
        if cut:
            return _error_response(500, "Simulated failure in the middle of generation")
        bodies = [
            self._body(job, 0, produced, job.reason(produced), final=True)
            for job, produced in results
        ]
        if fault == "torn_json":
            return _torn_response(orjson.dumps(bodies if batch else bodies[0]))
        for job, produced in results:
            self._account(job, produced)
        return _json_response(bodies if batch else bodies[0])

    async def _decode(self, job: _Job, *, half: bool) -> tuple[_Job, int]:
        """Hold a slot for the job's decode time; return how many tokens it produced."""
        try:
            if not await self.slots.acquire(job):
                return job, 0
            target = len(job.output_ids) // 2 if half else len(job.output_ids)
            deadline = job.decode_start + target / job.tokens_per_s
            if await job.sleep_until(deadline):
                return job, max(0, min(target, job.produced(asyncio.get_running_loop().time())))
            job.free_at = deadline
            return job, target
        except asyncio.CancelledError:
            self._count_disconnect(job)
            raise
        finally:
            self._finish(job)

    async def _serve_stream(
        self,
        request: web.Request,
        job: _Job,
        run: Callable[[web.StreamResponse], Awaitable[None]],
    ) -> web.StreamResponse:
        """An SSE response whose body `run` writes; a client that hangs up aborts the job."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await response.prepare(request)
            await run(response)
        except asyncio.CancelledError:
            self._count_disconnect(job)
            raise
        except ConnectionResetError:
            self._count_disconnect(job)
        finally:
            self._finish(job)
        return response

    async def _pace(
        self,
        job: _Job,
        emit: Callable[[int, int, str], Awaitable[None]],
        *,
        cut_half: bool = False,
    ) -> str:
        """Decode a streamed job in a slot, calling `emit(start, end, kind)` as each frame of
        tokens [start, end) is ready: kind "frame", then "last" once (the job is settled and its
        slot free by then), or "cut" half-way when `cut_half` (a stream fault) instead of "last".
        Returns the last kind. A job aborted before it got a slot gets one ("last") of 0 tokens.
        """
        if not await self.slots.acquire(job):
            self._account(job, 0)
            await emit(0, 0, "last")
            return "last"
        loop = asyncio.get_running_loop()
        total = len(job.output_ids)
        cut = total // 2 if cut_half else None
        sent = 0
        while True:
            end = min(sent + self.config.frame_tokens, total)
            deadline = job.decode_start + end / job.tokens_per_s
            idle = deadline <= loop.time()
            aborted = await job.sleep_until(deadline)
            if aborted:
                end = max(sent, job.produced(loop.time()))
            done = aborted or end == total
            if not aborted:
                job.free_at = deadline
            if cut is not None and (end >= cut or done):
                self.slots.release(job)
                job.settled = True
                await emit(sent, end, "cut")
                return "cut"
            if done:
                self.slots.release(job)
                self._account(job, end)
                await emit(sent, end, "last")
                return "last"
            await emit(sent, end, "frame")
            sent = end
            if idle:
                await asyncio.sleep(0)

    async def _stream(
        self, request: web.Request, job: _Job, fault: str | None
    ) -> web.StreamResponse:
        async def run(response: web.StreamResponse) -> None:
            async def emit(start: int, end: int, kind: str) -> None:
                if kind == "cut":
                    await self._stream_fault(response, job, start, end, fault)
                    return
                last = kind == "last"
                reason = job.reason(end) if last else None
                await response.write(_sse(self._body(job, start, end, reason, final=last)))

            cut_half = fault in ("stream_error", "torn_json")
            if await self._pace(job, emit, cut_half=cut_half) != "cut":
                await response.write(b"data: [DONE]\n\n")
                await response.write_eof()

        return await self._serve_stream(request, job, run)

    async def _stream_fault(
        self, response: web.StreamResponse, job: _Job, sent: int, end: int, fault: str | None
    ) -> None:
        if fault == "stream_error":
            if end > sent:
                await response.write(_sse(self._body(job, sent, end, None, final=False)))
            error = {"error": {"message": "Simulated failure in the middle of generation"}}
            await response.write(_sse(error))
            await response.write(b"data: [DONE]\n\n")
        else:
            event = _sse(self._body(job, sent, end, None, final=False))
            await response.write(event[: max(len(b"data: {"), len(event) // 2)])
            response.force_close()
        await response.write_eof()

    def _body(
        self,
        job: _Job,
        start: int,
        end: int,
        reason: dict[str, Any] | None,
        *,
        final: bool,
    ) -> dict[str, Any]:
        """One response object; in a stream `start` is where the previous frame ended."""
        if self.config.stream_output:
            ids = job.output_ids[start:end]
            text = _detokenize(ids, leading_space=start > 0)
        else:
            ids = job.output_ids[:end]
            text = _detokenize(ids, leading_space=False)
        meta: dict[str, Any] = {
            "id": job.rid,
            "finish_reason": reason,
            "prompt_tokens": job.prompt.prompt_tokens,
            "completion_tokens": end,
            "cached_tokens": 0,
            "weight_version": "default",
            "num_retractions": 0,
            "reasoning_tokens": 0,
            "dp_rank": None,
        }
        if final:
            meta["e2e_latency"] = asyncio.get_running_loop().time() - job.received
        return {"text": text, "output_ids": ids, "meta_info": meta}

    def _account(self, job: _Job, produced: int) -> None:
        job.settled = True
        if job.state == "aborted_in_queue" or (job.aborted and produced < len(job.output_ids)):
            self.stats.aborted += 1
            return
        self.stats.completed += 1
        self.stats.total_completion_tokens += produced
        self.stats.completed_rids.append(job.rid)
        cost = _cost(self.config, job.prompt.prompt_tokens, produced) if job.prompt.chat else None
        if cost is not None:
            self.stats.total_cost += cost

    def _count_disconnect(self, job: _Job) -> None:
        if not job.settled:
            job.settled = True
            self.stats.aborted += 1
            self.stats.disconnected += 1

    def _finish(self, job: _Job) -> None:
        self.slots.release(job)
        if job.state != "aborted_in_queue":
            job.state = "done"
        peers = self.jobs.get(job.rid)
        if peers is not None:
            peers.discard(job)
            if not peers:
                del self.jobs[job.rid]

    def _draw_fault(self, kinds: tuple[str, ...]) -> str | None:
        faults = self.config.faults
        hit: str | None = None
        for kind in kinds:
            probability = getattr(faults, kind)
            if probability > 0 and self.fault_rng.random() < probability and hit is None:
                hit = kind
        return hit

    async def _early_fault(
        self, request: web.Request, fault: str, *, openai: bool = False
    ) -> web.Response | None:
        """Faults that strike before any generation; None for the ones that strike during it.
        `openai` gives the error bodies and rate-limit headers of an OpenAI-style API."""
        faults = self.config.faults
        error = _openai_error if openai else _error_response
        if fault == "rate_429":
            response = error(429, "Simulated rate limit, retry later")
            response.headers["Retry-After"] = _format_seconds(faults.retry_after_s)
            if openai:
                reset_ms = round((time.time() + faults.retry_after_s) * 1000)
                response.headers["X-RateLimit-Limit"] = str(self.config.slots)
                response.headers["X-RateLimit-Remaining"] = "0"
                response.headers["X-RateLimit-Reset"] = str(reset_ms)
            return response
        if fault == "payment_402":
            return error(402, "Insufficient credits")
        if fault == "error_5xx":
            status = self.fault_rng.choice((500, 503))
            return error(status, f"Simulated server error ({status})")
        if fault == "timeout":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(faults.hang_s):
                    await self.closing.wait()
            _reset(request)
            return web.Response(status=504)
        if fault == "reset":
            _reset(request)
            return web.Response(status=500)
        return None

    def _parse(self, payload: object) -> tuple[list[_Prompt], bool, bool]:
        """Validate a /generate body the way SGLang does; return (prompts, stream, is_batch)."""
        if not isinstance(payload, dict):
            raise _BadRequest("The request body must be a JSON object")
        text = payload.get("text")
        input_ids = payload.get("input_ids")
        if text is None and input_ids is None:
            raise _BadRequest("Either text, input_ids or input_embeds should be provided.")
        if text is not None and input_ids is not None:
            raise _BadRequest("Either text or input_ids should be provided, not both.")
        stream = payload.get("stream", False)
        if not isinstance(stream, bool):
            raise _BadRequest(f"stream must be true or false, got {stream!r}")
        items: list[Any]
        if text is not None:
            if not isinstance(text, str | list):
                raise _BadRequest("text must be a string or a list of strings")
            batch = isinstance(text, list)
            items = text if isinstance(text, list) else [text]
        else:
            if not isinstance(input_ids, list):
                raise _BadRequest("input_ids must be a list of token ids or a list of such lists")
            batch = bool(input_ids) and isinstance(input_ids[0], list)
            items = input_ids if batch else [input_ids]
        if batch and not items:
            raise _BadRequest("The batch is empty.")
        if batch and stream:
            raise _BadRequest("The simulator does not stream batches; send one prompt per request")
        rids = self._rids(payload.get("rid"), batch, len(items))
        params = self._sampling_params(payload.get("sampling_params"), batch, len(items))
        prompts = [self._prompt(*args) for args in zip(items, rids, params, strict=True)]
        return prompts, stream, batch

    @staticmethod
    def _rids(rid: object, batch: bool, count: int) -> list[str]:
        if rid is None:
            return [uuid.uuid4().hex for _ in range(count)]
        if not batch:
            if not isinstance(rid, str):
                raise _BadRequest(f"rid must be a string, got {rid!r}")
            return [rid]
        if not isinstance(rid, list):
            raise _BadRequest("The rid should be a list for batch processing.")
        if len(rid) != count or not all(isinstance(item, str) for item in rid):
            raise _BadRequest("The rid list must hold one string per prompt in the batch.")
        return rid

    @staticmethod
    def _sampling_params(params: object, batch: bool, count: int) -> list[dict[str, Any]]:
        if params is None:
            return [{}] * count
        if isinstance(params, dict):
            return [params] * count
        if (
            batch
            and isinstance(params, list)
            and len(params) == count
            and all(isinstance(item, dict) for item in params)
        ):
            return params
        raise _BadRequest("sampling_params must be an object (or one object per batch prompt)")

    def _prompt(self, item: object, rid: str, params: dict[str, Any]) -> _Prompt:
        config = self.config
        if isinstance(item, str):
            if not item:
                raise _BadRequest("The input text is empty.")
            prompt_tokens = max(1, _count_text_tokens(item))
            key = b"text\0" + item.encode("utf-8", "surrogatepass")
        elif isinstance(item, list):
            if not item:
                raise _BadRequest("The input_ids is empty.")
            if not all(type(token) is int for token in item):
                raise _BadRequest("input_ids must hold integer token ids only")
            limit = config.vocab_size or _MAX_TOKEN_ID
            outside = [token for token in item if not 0 <= token < limit]
            if outside:
                raise _BadRequest(
                    f"The input_ids contain ids outside the vocabulary [0, {limit}): "
                    f"{outside[:5]} (a real server would crash on them)."
                )
            prompt_tokens = len(item)
            key = b"ids\0" + orjson.dumps(item)
        else:
            raise _BadRequest("Each prompt must be a string or a list of token ids")
        max_new_tokens = self._check_lengths(
            prompt_tokens, params.get("max_new_tokens"), "max_new_tokens", 0
        )
        return _Prompt(
            rid=rid,
            key=key,
            prompt_tokens=prompt_tokens,
            max_new_tokens=max_new_tokens,
            ignore_eos=_flag(params, "ignore_eos"),
            stop_candidates=[EOS_TOKEN_ID, *self._stops(params)],
            dataset=_dataset_of(rid),
        )

    def _check_lengths(
        self, prompt_tokens: int, max_new_tokens: object, name: str, minimum: int
    ) -> int | None:
        """Refuse a prompt or a completion cap that does not fit the context, as SGLang does;
        return the cap (None when not given)."""
        context_length = self.config.context_length
        if prompt_tokens >= context_length:
            raise _BadRequest(
                f"The input ({prompt_tokens} tokens) is longer than the model's context "
                f"length ({context_length} tokens)."
            )
        if max_new_tokens is None:
            return None
        if type(max_new_tokens) is not int:
            raise _BadRequest(f"{name} must be an integer, got {max_new_tokens!r}")
        if max_new_tokens < minimum:
            raise _BadRequest(f"{name} must be at least {minimum}, got {max_new_tokens}.")
        if max_new_tokens + prompt_tokens >= context_length:
            raise _BadRequest(
                "Requested token count exceeds the model's maximum context length of "
                f"{context_length} tokens. You requested a total of "
                f"{max_new_tokens + prompt_tokens} tokens: {prompt_tokens} tokens from the "
                f"input messages and {max_new_tokens} tokens for the completion. Please "
                "reduce the number of tokens in the input messages or the completion to fit "
                "within the limit."
            )
        return max_new_tokens

    @staticmethod
    def _stops(params: dict[str, Any]) -> list[int | str]:
        stop_ids = params.get("stop_token_ids") or []
        stop = params.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop_ids, list) or not all(type(t) is int for t in stop_ids):
            raise _BadRequest("stop_token_ids must be a list of integers")
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise _BadRequest("stop must be a string or a list of strings")
        return [*stop_ids, *stop]

    # ---- /v1/chat/completions ------------------------------------------------------------------

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """OpenAI's chat completions on the same slots, completions, faults and stats as
        /generate. The dataset (length profile) comes from the `X-Sim-Dataset` header."""
        received = asyncio.get_running_loop().time()
        self.stats.requests += 1
        denied = self._authorize(request)
        if denied is not None:
            return denied
        try:
            try:
                payload = orjson.loads(await request.read())
            except orjson.JSONDecodeError as exc:
                raise _BadRequest(f"Invalid JSON body: {exc}") from None
            chat = self._parse_chat(payload, request.headers.get("X-Sim-Dataset", ""))
        except _BadRequest as exc:
            self.stats.rejected += 1
            return _openai_error(400, str(exc))

        fault = self._draw_fault(FAULT_KINDS)
        if fault is not None:
            self.stats.faults[fault] += 1
            refusal = await self._early_fault(request, fault, openai=True)
            if refusal is not None:
                return refusal

        job = _Job(chat.prompt, received)
        self.jobs.setdefault(job.rid, set()).add(job)
        if chat.stream:
            return await self._chat_stream(request, job, chat, fault)
        cut = fault == "stream_error"
        _, produced = await self._decode(job, half=cut)
        if cut:
            return _openai_error(500, "Simulated failure in the middle of generation")
        message = {
            "role": "assistant",
            "content": _detokenize(job.output_ids[:produced], leading_space=False),
        }
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": job.reason(produced)["type"],
        }
        body = {
            **chat.head("chat.completion"),
            "choices": [choice],
            "usage": self._usage(job, produced),
        }
        if fault == "torn_json":
            return _torn_response(orjson.dumps(body))
        self._account(job, produced)
        return _json_response(body)

    async def _chat_stream(
        self, request: web.Request, job: _Job, chat: _Chat, fault: str | None
    ) -> web.StreamResponse:
        config = self.config
        ending = config.openai_stream_end
        keepalive = config.openai_keepalive
        # OpenAI: with include_usage every chunk before the usage chunk says "usage": null.
        usage_null = chat.include_usage and ending == "done"
        usage_on_last = chat.include_usage and ending in ("none", "usage_with_choices")
        head = chat.head("chat.completion.chunk")

        def chunk(delta: dict[str, Any], reason: str | None, **extra: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
            body = {**head, "choices": [choice], **extra}
            if usage_null:
                body.setdefault("usage", None)
            return _sse(body)

        async def run(response: web.StreamResponse) -> None:
            produced = 0
            started = False

            async def emit(start: int, end: int, kind: str) -> None:
                nonlocal produced, started
                if not started:
                    started = True
                    await response.write(chunk({"role": "assistant", "content": ""}, None))
                text = _detokenize(job.output_ids[start:end], leading_space=start > 0)
                if kind == "cut":
                    await self._chat_stream_fault(response, chunk, text, fault)
                elif kind == "frame":
                    await response.write(chunk({"content": text}, None))
                else:
                    produced = end
                    extra = {"usage": self._usage(job, end)} if usage_on_last else {}
                    reason = job.reason(end)["type"]
                    await response.write(chunk({"content": text}, reason, **extra))

            if keepalive:
                await response.write(OPENROUTER_KEEPALIVE)
            cut_half = fault in ("stream_error", "torn_json")
            if await self._pace(job, emit, cut_half=cut_half) == "cut":
                return
            if chat.include_usage and ending == "done":
                usage = self._usage(job, produced)
                await response.write(_sse({**head, "choices": [], "usage": usage}))
            elif chat.include_usage and ending == "usage_no_choices":
                await response.write(_sse({**head, "usage": self._usage(job, produced)}))
            if ending != "none":
                await response.write(b"data: [DONE]\n\n")
            await response.write_eof()

        return await self._serve_stream(request, job, run)

    @staticmethod
    async def _chat_stream_fault(
        response: web.StreamResponse,
        chunk: Callable[..., bytes],
        text: str,
        fault: str | None,
    ) -> None:
        if fault == "stream_error":
            # OpenRouter: a provider error after the 200 went out arrives as a last chunk with
            # finish_reason "error" and an `error` field; then the stream ends.
            if text:
                await response.write(chunk({"content": text}, None))
            error = {"message": "Simulated rate limit in the middle of generation", "code": 429}
            await response.write(chunk({"content": ""}, "error", error=error))
        else:
            event = chunk({"content": text}, None)
            await response.write(event[: max(len(b"data: {"), len(event) // 2)])
            response.force_close()
        await response.write_eof()

    def _usage(self, job: _Job, completion_tokens: int) -> dict[str, Any]:
        """OpenRouter's usage object; `cost` only when the simulator has a price."""
        prompt_tokens = job.prompt.prompt_tokens
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        cost = _cost(self.config, prompt_tokens, completion_tokens)
        if cost is not None:
            usage["cost"] = cost
        usage["prompt_tokens_details"] = {"cached_tokens": 0}
        usage["completion_tokens_details"] = {"reasoning_tokens": 0}
        return usage

    def _authorize(self, request: web.Request) -> web.Response | None:
        """None when the request may pass: no key is set, or it brings `Bearer <api_key>`."""
        key = self.config.api_key
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
        self.stats.unauthorized += 1
        return _openai_error(401, message)

    def _parse_chat(self, payload: object, dataset: str) -> _Chat:
        """Validate a chat completion body (vLLM's checks, `transformers serve`'s model check)."""
        config = self.config
        if not isinstance(payload, dict):
            raise _BadRequest("The request body must be a JSON object")
        model = payload.get("model")
        if model is not None and not isinstance(model, str):
            raise _BadRequest(f"model must be a string, got {model!r}")
        if config.strict_model and model != config.model_name:
            raise _BadRequest(
                f"The model {model!r} is not served here; the only model is {config.model_name!r}"
            )
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("messages must be a non-empty list of {role, content} objects")
        turns = [_chat_turn(message, index) for index, message in enumerate(messages)]
        prompt_tokens = max(1, sum(_count_text_tokens(text) for _, text in turns))
        name = "max_completion_tokens"
        if payload.get(name) is None:
            name = "max_tokens"
        cap = self._check_lengths(prompt_tokens, payload.get(name), name, 1)
        for knob, top in (("temperature", 2.0), ("top_p", 1.0)):
            value = payload.get(knob)
            if value is not None and not (_is_number(value) and 0 <= value <= top):
                raise _BadRequest(f"{knob} must be a number from 0 to {top:g}, got {value!r}")
        choices = payload.get("n")
        if choices is not None and (type(choices) is not int or choices != 1):
            raise _BadRequest(f"The simulator answers n=1 only, got n={choices!r}")
        options = payload.get("stream_options")
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise _BadRequest("stream_options must be an object")
        hex_id = uuid.uuid4().hex
        prompt = _Prompt(
            rid=f"oa/{dataset}/{hex_id}",
            key=b"chat\0" + orjson.dumps(turns),
            prompt_tokens=prompt_tokens,
            # No cap means "up to the context", as on OpenAI-style servers.
            max_new_tokens=config.context_length - prompt_tokens if cap is None else cap,
            ignore_eos=_flag(payload, "ignore_eos"),  # a vLLM / SGLang extension
            stop_candidates=[EOS_TOKEN_ID, *self._stops(payload)],
            dataset=dataset,
            chat=True,
        )
        return _Chat(
            prompt=prompt,
            id=f"chatcmpl-{hex_id}",
            model=model or config.model_name,
            created=int(time.time()),
            stream=_flag(payload, "stream"),
            include_usage=_flag(options, "include_usage"),
        )

    async def list_models(self, request: web.Request) -> web.Response:
        denied = self._authorize(request)
        if denied is not None:
            return denied
        model = {"id": self.config.model_name, "object": "model", "created": 0, "owned_by": "sim"}
        return _json_response({"object": "list", "data": [model]})

    # ---- the other endpoints -------------------------------------------------------------------

    async def abort_request(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            payload = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError as exc:
            return _error_response(400, f"Invalid JSON body: {exc}")
        if not isinstance(payload, dict):
            return _error_response(400, "The request body must be a JSON object")
        self.abort(payload.get("rid"), abort_all=payload.get("abort_all") is True)
        return web.Response(status=200)

    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=503 if self.shutting_down else 200)

    async def model_info(self, _request: web.Request) -> web.Response:
        return _json_response(
            {
                "model_path": self.config.model_path,
                "tokenizer_path": self.config.model_path,
                "model_type": "simulated",
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
            }
        )

    async def server_info(self, _request: web.Request) -> web.Response:
        config = self.config
        return _json_response(
            {
                "version": SIM_VERSION,
                "status": "shutting_down" if self.shutting_down else "ready",
                "model_path": config.model_path,
                "tokenizer_path": config.model_path,
                "served_model_name": config.model_path,
                "context_length": config.context_length,
                "max_running_requests": config.slots,
                "max_total_num_tokens": config.slots * config.context_length,
                "random_seed": config.seed,
                "stream_output": config.stream_output,
                "stream_interval": config.frame_tokens,
                "vocab_size": config.vocab_size or DEFAULT_VOCAB_SIZE,
                "sim": _config_json(config),
            }
        )

    async def load(self, _request: web.Request) -> web.Response:
        """SGLang's legacy /get_load shape: one entry per data-parallel rank (here just one)."""
        running = [job for jobs in self.jobs.values() for job in jobs if job.state == "running"]
        queued = [job for jobs in self.jobs.values() for job in jobs if job.state == "queued"]
        return _json_response(
            [
                {
                    "dp_rank": 0,
                    "num_reqs": len(running) + len(queued),
                    "num_running_reqs": len(running),
                    "num_waiting_reqs": len(queued),
                    "num_tokens": sum(job.prompt.prompt_tokens for job in running),
                    "num_pending_tokens": sum(job.prompt.prompt_tokens for job in queued),
                    "ts_tic": asyncio.get_running_loop().time(),
                }
            ]
        )

    async def sim_stats(self, _request: web.Request) -> web.Response:
        return _json_response(self.stats)

    async def sim_config(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            try:
                self.reconfigure(orjson.loads(await request.read()))
            except (orjson.JSONDecodeError, ValueError) as exc:
                return _error_response(400, str(exc))
        return _json_response(_config_json(self.config))


def _reset(request: web.Request) -> None:
    """Drop the connection with a TCP RST, as a crashed server or a cut link does."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


_SIM = web.AppKey("gen_tui_sim", _Simulator)


def create_app(config: SimConfig) -> web.Application:
    """The simulator as an aiohttp application.

    Run it with `handler_cancellation=True` (SimServer and `main` do): aiohttp only notices a
    client that hangs up on a non-streaming request when it may cancel the handler, and a
    request nobody waits for must give its slot back like on a real server.
    """
    sim = _Simulator(config)
    app = web.Application(client_max_size=_CLIENT_MAX_SIZE)
    app[_SIM] = sim
    app.router.add_post("/generate", sim.generate)
    app.router.add_put("/generate", sim.generate)
    app.router.add_post("/abort_request", sim.abort_request)
    app.router.add_get("/health", sim.health)
    app.router.add_get("/health_generate", sim.health)
    app.router.add_get("/get_model_info", sim.model_info)
    app.router.add_get("/get_server_info", sim.server_info)
    app.router.add_get("/get_load", sim.load)
    app.router.add_post("/v1/chat/completions", sim.chat_completions)
    app.router.add_get("/v1/models", sim.list_models)
    app.router.add_get("/_sim/stats", sim.sim_stats)
    app.router.add_get("/_sim/config", sim.sim_config)
    app.router.add_post("/_sim/config", sim.sim_config)
    app.on_shutdown.append(sim.on_shutdown)
    return app


class SimServer:
    """The simulator on a real socket, as an async context manager for tests, demo and bench."""

    def __init__(self, config: SimConfig, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.url = ""
        self.app = create_app(config)
        self._sim = self.app[_SIM]
        self._runner: web.AppRunner | None = None

    @property
    def config(self) -> SimConfig:
        return self._sim.config

    @config.setter
    def config(self, value: SimConfig) -> None:
        value.validate()
        self._sim.config = value
        self._sim.slots.wake()

    @property
    def stats(self) -> SimStats:
        return self._sim.stats

    def configure(self, patch: Mapping[str, Any]) -> None:
        """Apply a partial config like `POST /_sim/config` does (and admit queued requests if
        slots grew, which assigning `config.slots` directly only does at the next release)."""
        self._sim.reconfigure(patch)

    async def start(self) -> str:
        runner = web.AppRunner(
            self.app, handler_cancellation=True, access_log=None, shutdown_timeout=2.0
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            self._sim.begin_shutdown()
            await runner.cleanup()

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()


# ---- `gen-tui sim` -----------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag costs one line on stderr instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _probability(text: str) -> float:
    value = _float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a probability between 0 and 1, got {text!r}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _non_negative(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _positive(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text!r}")
    return value


def _whole(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {text!r}")
        return value

    return parse


def _port(text: str) -> int:
    value = _whole(0)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, got {text!r}")
    return value


def _profile_arg(text: str) -> tuple[str, LengthProfile]:
    name, sep, spec = text.partition("=")
    mean_text, _, cv_text = spec.partition(":")
    if not sep or not name.strip() or not mean_text:
        raise argparse.ArgumentTypeError(f"expected NAME=MEAN[:CV], got {text!r}")
    try:
        return name.strip(), LengthProfile(
            mean=_positive(mean_text), cv=_non_negative(cv_text) if cv_text else 0.95
        )
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _cost_arg(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(
            f"expected IN,OUT dollars per million tokens, got {text!r}"
        )
    try:
        return _non_negative(parts[0]), _non_negative(parts[1])
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _build_parser() -> _Parser:
    parser = _Parser(
        prog="gen-tui sim",
        description=(
            "Run a simulated SGLang server (native /generate API, and OpenAI's "
            "/v1/chat/completions) for demos and tests."
        ),
    )
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    add("--port", type=_port, default=30000, help="port, 0 for any free one (default: 30000)")
    add("--slots", type=_whole(1), default=64, help="concurrent generations (default: 64)")
    add("--tokens-per-s", type=_positive, default=200.0, help="decode speed of one slot")
    add("--prefill-s", type=_non_negative, default=0.0, help="latency before the first token")
    add("--vocab-size", type=_whole(FIRST_TOKEN_ID + 1), help="refuse input ids outside it")
    add("--context-length", type=_whole(2), default=32768)
    add(
        "--profile",
        type=_profile_arg,
        action="append",
        default=[],
        metavar="NAME=MEAN[:CV]",
        help="completion-length profile of the dataset NAME (the rid prefix); repeatable",
    )
    add("--default-mean", type=_positive, default=600.0, help="mean length for other datasets")
    add("--default-cv", type=_non_negative, default=0.95)
    add("--seed", type=_whole(0), default=0)
    add("--stream-output", action="store_true", help="stream frames carry only the new ids")
    add("--frame-tokens", type=_whole(1), default=8, help="tokens per stream frame")
    add("--model-path", default="gen-tui/simulated-model")
    add("--fail-5xx", type=_probability, default=0.0, metavar="P")
    add("--fail-429", type=_probability, default=0.0, metavar="P")
    add("--retry-after", type=_non_negative, default=1.0, metavar="SECONDS")
    add("--fail-timeout", type=_probability, default=0.0, metavar="P")
    add("--hang-s", type=_non_negative, default=3600.0, metavar="SECONDS")
    add("--fail-reset", type=_probability, default=0.0, metavar="P")
    add("--fail-torn", type=_probability, default=0.0, metavar="P")
    add("--fail-midstream", type=_probability, default=0.0, metavar="P")
    add("--fail-402", type=_probability, default=0.0, metavar="P", help="/v1: out of credits")
    add("--model-name", default="sim-model", help="the model /v1/chat/completions serves")
    add("--strict-model", action="store_true", help="/v1: refuse any other model with a 400")
    add(
        "--api-key-env",
        metavar="NAME",
        help="/v1: require `Authorization: Bearer KEY`, KEY read from the environment "
        "variable NAME (never pass a secret on the command line)",
    )
    add(
        "--cost",
        type=_cost_arg,
        metavar="IN,OUT",
        help="/v1: dollars per million input,output tokens, reported as usage.cost",
    )
    add(
        "--openai-stream-end",
        choices=OPENAI_STREAM_ENDS,
        default="done",
        help="/v1: how a stream ends (default: done)",
    )
    add("--openai-keepalive", action="store_true", help="/v1: open streams with an SSE comment")
    return parser


def _config_from_args(args: argparse.Namespace) -> SimConfig:
    api_key = None
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ValueError(
                f"--api-key-env: the environment variable {args.api_key_env} is not set or empty"
            )
    config = SimConfig(
        slots=args.slots,
        tokens_per_s=args.tokens_per_s,
        prefill_s=args.prefill_s,
        vocab_size=args.vocab_size,
        context_length=args.context_length,
        profiles=dict(args.profile),
        default_profile=LengthProfile(mean=args.default_mean, cv=args.default_cv),
        faults=Faults(
            error_5xx=args.fail_5xx,
            rate_429=args.fail_429,
            retry_after_s=args.retry_after,
            timeout=args.fail_timeout,
            hang_s=args.hang_s,
            reset=args.fail_reset,
            torn_json=args.fail_torn,
            stream_error=args.fail_midstream,
            payment_402=args.fail_402,
        ),
        seed=args.seed,
        stream_output=args.stream_output,
        frame_tokens=args.frame_tokens,
        model_path=args.model_path,
        model_name=args.model_name,
        strict_model=args.strict_model,
        api_key=api_key,
        cost_per_million=args.cost,
        openai_stream_end=args.openai_stream_end,
        openai_keepalive=args.openai_keepalive,
    )
    config.validate()
    return config


async def _serve(config: SimConfig, host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    server = SimServer(config, host, port)
    await server.start()
    try:
        print(f"listening on {server.url}", flush=True)
        await stop.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    """`gen-tui sim`: serve until SIGINT/SIGTERM; the first stdout line names the URL."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        config = _config_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        asyncio.run(_serve(config, args.host, args.port))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(
            f"{parser.prog}: error: cannot listen on {args.host}:{args.port}: {reason}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        pass
    return 0
