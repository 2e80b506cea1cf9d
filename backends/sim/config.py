"""The simulator's settings: what shapes the server (slots, speed, length profiles, faults, the
/v1 knobs), checked before it goes live and patchable in place while it runs, and the counters
of what it lived through.

One module because `POST /_sim/config`, `SimServer`'s config and the CLI must agree on every
field and every check; constants the two APIs share (token ids, fault kinds, stream endings)
live here so that neither front-end owns them.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeGuard

__all__ = [
    "DEFAULT_VOCAB_SIZE",
    "EOS_TOKEN_ID",
    "FAULT_KINDS",
    "FIRST_TOKEN_ID",
    "METRICS_NAMES",
    "OPENAI_REASONING",
    "OPENAI_STREAM_ENDS",
    "SERVER_DEFAULT_MAX_NEW_TOKENS",
    "Faults",
    "LengthProfile",
    "SimConfig",
    "SimStats",
    "apply_config_patch",
    "config_json",
    "cost",
    "is_number",
]

EOS_TOKEN_ID = 2
FIRST_TOKEN_ID = 3
DEFAULT_VOCAB_SIZE = 32000
SERVER_DEFAULT_MAX_NEW_TOKENS = 128
"""What SGLang itself generates for a /generate without `max_new_tokens` (seen on 0.5.23):
the simulated server's default, not gen-tui's (which always sends a cap)."""
# Precedence when several faults are drawn for the same request.
FAULT_KINDS = (
    "reset",
    "timeout",
    "rate_429",
    "payment_402",
    "error_5xx",
    "stream_error",
    "torn_json",
    "huge_error",
)
# How a /v1/chat/completions stream ends, as different servers do it:
#   done               OpenAI, vLLM, SGLang, OpenRouter: usage (if asked) in a chunk with
#                      "choices": [], every earlier chunk "usage": null, then `data: [DONE]`;
#   none               transformers serve: usage on the last chunk that still has choices, and no
#                      `[DONE]`: the stream just ends;
#   usage_with_choices usage on the last content chunk (the one with finish_reason), `[DONE]`;
#   usage_no_choices   a separate usage chunk without a "choices" key at all, then `[DONE]`.
OPENAI_STREAM_ENDS = ("done", "none", "usage_with_choices", "usage_no_choices")
# How a /v1/chat/completions answer carries a thinking model's reasoning (see sim/reasoning.py):
#   none               no reasoning: every token is answer;
#   reasoning_content  SGLang's and vLLM's /v1 with a reasoning parser;
#   reasoning          OpenRouter's text field alone;
#   reasoning_details  OpenRouter's typed parts alone (and an encrypted part, unreadable);
#   openrouter         both, the same text twice, as OpenRouter really answers.
OPENAI_REASONING = ("none", "reasoning_content", "reasoning", "reasoning_details", "openrouter")
# Which Prometheus names `GET /metrics` speaks (see sim/metrics.py):
#   sglang  SGLang started with --enable-metrics: `sglang:*`, labelled per rank;
#   vllm    vLLM's `vllm:*` (no throughput gauge: a client takes the counter's rate);
#   off     SGLang without --enable-metrics: /metrics answers 404.
METRICS_NAMES = ("sglang", "vllm", "off")


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

    `huge_error` is a 500 whose message is HUGE_ERROR_CHARS long (a proxy or a server
    dumping a whole request or a stack into its error): past what a client reads of an error
    body, so its quote must say it is one.
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
    huge_error: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for kind in FAULT_KINDS:
            value = getattr(self, kind)
            if not is_number(value) or not 0.0 <= value <= 1.0:
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
    openai_reasoning: str = "none"  # one of OPENAI_REASONING: a thinking profile
    metrics: str = "sglang"  # one of METRICS_NAMES: what GET /metrics speaks
    measured_throughput: bool = False
    """/metrics' gen_throughput as SGLang measures it, the tokens generated over the last
    seconds, always (default: the running requests' speed, measured only while this process
    runs behind its schedule). The demo's simulator shares a core with its engine: read at
    the moments its loop is free, the running requests' speed said 1.75M tok/s beside the
    1.1M recorded (issue 31, point 7)."""
    batch_validate_s: float = 0.2
    """The Batch API (batch_api.py): how long a new batch says `validating`."""
    batch_delay_s: float = 2.0
    """How long a batch's requests take, all of them, after validating (they finish evenly
    over it, the first line first): the provider's queue, shrunk for tests."""
    batch_finalize_s: float = 0.2
    """How long a batch whose requests are all done says `finalizing`."""
    batch_window_s: float = 86400.0
    """The completion window: a batch not done by then expires with what it finished."""
    batch_fail_share: float = 0.0
    """The share of a batch's requests that fail (to its error file), drawn per custom_id."""
    batch_damage: bool = False
    """Damage each output file of two lines or more as a faulty provider or proxy might: a
    line for a custom_id the batch never had after its first line, and its last line cut in
    half."""
    batch_price_share: float = 0.5
    """A batch request's price against a live one's (`cost_per_million`): providers sell
    batch tokens at about half."""
    kv_tokens: int | None = None
    """The KV cache, in tokens (None: slots x context, never full). When the requests in the
    batch would need more than this by their ends, an admission retracts one: that work is
    recomputed, so each request admitted over the limit decodes slower (see slots.py)."""

    def validate(self) -> None:
        """Raise ValueError naming the first bad field: a config is checked before it is live."""
        _check_int(self.slots, "slots", 1)
        _check_int(self.context_length, "context_length", 2)
        _check_int(self.frame_tokens, "frame_tokens", 1)
        if self.kv_tokens is not None:
            _check_int(self.kv_tokens, "kv_tokens", 1)
        _check_int(self.seed, "seed", None)
        if self.vocab_size is not None:
            _check_int(self.vocab_size, "vocab_size", FIRST_TOKEN_ID + 1)
        _check_number(self.tokens_per_s, "tokens_per_s", positive=True)
        _check_number(self.prefill_s, "prefill_s")
        for name in ("batch_validate_s", "batch_delay_s", "batch_finalize_s"):
            _check_number(getattr(self, name), name)
        _check_number(self.batch_window_s, "batch_window_s", positive=True)
        for name in ("batch_fail_share", "batch_price_share"):
            value = getattr(self, name)
            _check_number(value, name)
            if value > 1:
                raise ValueError(f"{name} must be a share from 0 to 1, got {value!r}")
        if not isinstance(self.stream_output, bool):
            raise ValueError(f"stream_output must be true or false, got {self.stream_output!r}")
        if not isinstance(self.model_path, str) or not self.model_path:
            raise ValueError(f"model_path must be a non-empty string, got {self.model_path!r}")
        if not isinstance(self.model_name, str) or not self.model_name:
            raise ValueError(f"model_name must be a non-empty string, got {self.model_name!r}")
        for name in ("strict_model", "openai_keepalive", "measured_throughput", "batch_damage"):
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
        if self.openai_reasoning not in OPENAI_REASONING:
            raise ValueError(
                f"openai_reasoning must be one of {', '.join(OPENAI_REASONING)}, "
                f"got {self.openai_reasoning!r}"
            )
        if self.metrics not in METRICS_NAMES:
            raise ValueError(
                f"metrics must be one of {', '.join(METRICS_NAMES)}, got {self.metrics!r}"
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
    `unauthorized` counts 401s. `abort_requests` counts the rids named in POST
    /abort_request, live or not (what a client asked, apart from what a disconnect ended:
    behind a router, only this shows the abort reached the worker). Chat completions count
    in the same fields, with rids `oa/<dataset>/<hex>`.
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
    generated_tokens: int = 0
    """Tokens decoded by requests that left their slot, finished or not (what a GPU did);
    /metrics adds the running ones' to it."""
    retracted: int = 0
    total_completion_tokens: int = 0
    total_cost: float = 0.0
    unauthorized: int = 0
    abort_requests: int = 0
    completed_rids: list[str] = field(default_factory=list)
    max_new_tokens: dict[str, int | None] = field(default_factory=dict)
    """The cap each accepted request asked for, by rid (a chat without one: the context left)."""


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
        elif key in ("tokens_per_s", "prefill_s", *BATCH_NUMBERS):
            setattr(candidate, key, _patch_number(value, key))
        elif key in ("slots", "context_length", "frame_tokens", "seed"):
            setattr(candidate, key, _patch_int(value, key))
        elif key in ("vocab_size", "kv_tokens"):
            setattr(candidate, key, None if value is None else _patch_int(value, key))
        elif key in (
            "stream_output",
            "strict_model",
            "openai_keepalive",
            "measured_throughput",
            "batch_damage",
        ):
            if not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false")
            setattr(candidate, key, value)
        elif key in (
            "model_path",
            "model_name",
            "api_key",
            "openai_stream_end",
            "openai_reasoning",
            "metrics",
        ):
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


BATCH_NUMBERS = (
    "batch_validate_s",
    "batch_delay_s",
    "batch_finalize_s",
    "batch_window_s",
    "batch_fail_share",
    "batch_price_share",
)
"""The Batch API's settings a config patch may change (`POST /_sim/config`)."""

_FAULT_FIELDS = frozenset(item.name for item in fields(Faults))


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or float that is not a bool (JSON true is no number here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_number(value: object, name: str, *, positive: bool = False) -> None:
    if not (is_number(value) and math.isfinite(value) and value >= 0 and (value or not positive)):
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"{name} must be a {kind} number, got {value!r}")


def _check_int(value: object, name: str, minimum: int | None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")


def _patch_number(value: object, name: str) -> float:
    if not is_number(value):
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


def config_json(config: SimConfig) -> dict[str, Any]:
    """The config as JSON for the info endpoints, with the API key masked: it is a secret."""
    shown = dataclasses.asdict(config)
    if config.api_key is not None:
        shown["api_key"] = "***"
    return shown


def _profile_from_json(value: object, name: str) -> LengthProfile:
    if is_number(value):
        return LengthProfile(mean=float(value))
    if isinstance(value, Mapping) and set(value) <= {"mean", "cv"} and "mean" in value:
        return LengthProfile(
            mean=_patch_number(value["mean"], f"{name}.mean"),
            cv=_patch_number(value.get("cv", 0.95), f"{name}.cv"),
        )
    raise ValueError(f"{name} must be a mean or an object {{'mean': .., 'cv': ..}}, got {value!r}")


def cost(config: SimConfig, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What a chat completion is billed in $, or None when the simulator has no price."""
    if config.cost_per_million is None:
        return None
    per_input, per_output = config.cost_per_million
    return round((prompt_tokens * per_input + completion_tokens * per_output) / 1e6, 12)
