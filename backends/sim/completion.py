"""What a prompt gets: its validation common to both APIs and its deterministic completion.

Both front-ends (SGLang's /generate and OpenAI's /v1/chat/completions) turn a request into a
`Prompt` and refuse bad ones with `BadRequest`; the completion depends on the prompt alone, so
a retried or resumed request sees the same answer whichever API it came through.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gen_tui.backends.sim.config import (
    DEFAULT_VOCAB_SIZE,
    EOS_TOKEN_ID,
    FIRST_TOKEN_ID,
    SERVER_DEFAULT_MAX_NEW_TOKENS,
    SimConfig,
)

__all__ = [
    "WORDS",
    "BadRequest",
    "Prompt",
    "check_lengths",
    "count_text_tokens",
    "dataset_of",
    "detokenize",
    "flag",
    "plan",
    "stop_candidates",
]

_TEXT_TOKEN = re.compile(r"\w+|[^\w\s]")
WORDS = (
    "the", "model", "returns", "a", "short", "answer", "with", "some", "code", "and", "text",
    "for", "each", "input", "value", "list", "of", "items", "in", "order", "then", "it",
    "checks", "that", "result", "is", "correct", "before", "writing", "output", "to", "file",
    "function", "class", "method", "data", "set", "test", "case", "loop", "over", "range",
    "return", "error", "when", "empty", "string", "number", "count", "tokens", "index", "key",
    "map", "sum", "total", "step", "next", "line", "print", "call", "new", "old", "true", "false",
)  # fmt: skip
"""The simulated model's words, one token each: its text for token ids (`detokenize`). The
demo tokenizer learns them too, so that a tokenizer meeting the simulator's text counts about
as many tokens as it said it generated (`ids_gap` near 0), as a model's own tokenizer does."""


class BadRequest(Exception):
    """A request the real server refuses with HTTP 400; the message is what the client sees."""


@dataclass
class Prompt:
    """One prompt as either API asked for it: what the deterministic completion depends on
    (`key`, `dataset`), its caps, its stop candidates and whether it is billed."""

    rid: str
    key: bytes
    prompt_tokens: int
    max_new_tokens: int | None
    ignore_eos: bool
    stop_candidates: list[int | str]
    dataset: str = ""  # picks the length profile: the rid prefix, or X-Sim-Dataset on /v1
    chat: bool = False  # a /v1/chat/completions request: billed when a price is set


def dataset_of(rid: str) -> str:
    """The dataset a /generate rid names: its prefix up to the first `/` (none without one)."""
    return rid.split("/", 1)[0] if "/" in rid else ""


def plan(config: SimConfig, prompt: Prompt) -> tuple[list[int], dict[str, Any]]:
    """The completion a prompt gets: seeded by (seed, dataset, prompt) alone, never by the rid's
    unique part or by max_new_tokens, so a retry or a resumed run sees the same answer and a
    tighter cap only truncates it."""
    dataset = prompt.dataset
    profile = config.profiles.get(dataset, config.default_profile)
    digest = hashlib.blake2b(f"{config.seed}\0{dataset}\0".encode() + prompt.key, digest_size=16)
    seed = int.from_bytes(digest.digest(), "big")
    rng = random.Random(seed)
    natural = profile.draw(rng)
    cap = SERVER_DEFAULT_MAX_NEW_TOKENS if prompt.max_new_tokens is None else prompt.max_new_tokens
    cap = min(cap, config.context_length - prompt.prompt_tokens)
    length = cap if prompt.ignore_eos else min(natural, cap)
    vocab = config.vocab_size or DEFAULT_VOCAB_SIZE
    output_ids = rng.choices(range(FIRST_TOKEN_ID, vocab), k=length)
    if prompt.ignore_eos or natural >= cap:
        return output_ids, {"type": "length", "length": cap}
    matched = prompt.stop_candidates[seed % len(prompt.stop_candidates)]
    return output_ids, {"type": "stop", "matched": matched}


def count_text_tokens(text: str) -> int:
    """The simulator's tokenizer for text: words and punctuation marks."""
    return len(_TEXT_TOKEN.findall(text))


def flag(params: Mapping[str, Any], name: str) -> bool:
    """A boolean option of a request (false when absent); anything but a bool is a 400."""
    value = params.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{name} must be true or false, got {value!r}")
    return value


def detokenize(ids: list[int], leading_space: bool) -> str:
    """The simulator's text for token ids: one word each; `leading_space` when the text
    continues earlier frames of a stream."""
    text = " ".join([WORDS[token % len(WORDS)] for token in ids])
    return " " + text if leading_space and text else text


def check_lengths(
    context_length: int, prompt_tokens: int, max_new_tokens: object, name: str, minimum: int
) -> int | None:
    """Refuse a prompt or a completion cap that does not fit the context, as SGLang does;
    return the cap (None when not given)."""
    if prompt_tokens >= context_length:
        raise BadRequest(
            f"The input ({prompt_tokens} tokens) is longer than the model's context "
            f"length ({context_length} tokens)."
        )
    if max_new_tokens is None:
        return None
    if type(max_new_tokens) is not int:
        raise BadRequest(f"{name} must be an integer, got {max_new_tokens!r}")
    if max_new_tokens < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {max_new_tokens}.")
    if max_new_tokens + prompt_tokens >= context_length:
        raise BadRequest(
            "Requested token count exceeds the model's maximum context length of "
            f"{context_length} tokens. You requested a total of "
            f"{max_new_tokens + prompt_tokens} tokens: {prompt_tokens} tokens from the "
            f"input messages and {max_new_tokens} tokens for the completion. Please "
            "reduce the number of tokens in the input messages or the completion to fit "
            "within the limit."
        )
    return max_new_tokens


def stop_candidates(params: dict[str, Any]) -> list[int | str]:
    """What a finished answer may say it stopped on: EOS, or a stop token id or string the
    request names (checked here)."""
    stop_ids = params.get("stop_token_ids") or []
    stop = params.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop_ids, list) or not all(type(t) is int for t in stop_ids):
        raise BadRequest("stop_token_ids must be a list of integers")
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest("stop must be a string or a list of strings")
    return [EOS_TOKEN_ID, *stop_ids, *stop]
