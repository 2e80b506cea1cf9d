"""A stand-in for an SGLang server: the native `/generate` protocol without a GPU.

The demo, the tests and the benchmarks need a server that answers exactly like SGLang 0.5.x
(validation, response and stream shapes, aborts, batch slots that queue and pace work) and that
can be told to misbehave (5xx, 429, hangs, resets, torn bodies) on demand. Completions are
deterministic per prompt, so a resumed or retried run can be checked against a straight one.

It also speaks OpenAI's `POST /v1/chat/completions` (and `GET /v1/models`) on the same slots,
completions and faults, with what OpenRouter and `transformers serve` add: bearer-key auth,
`usage.cost`, 402 for credits, 429 with `X-RateLimit-Reset`, the mid-stream error chunk, and each
stream ending seen in the wild (`SimConfig.openai_stream_end`), and a thinking model's reasoning
in each shape servers send it (`SimConfig.openai_reasoning`).
"""

from gen_tui.backends.sim.cli import main
from gen_tui.backends.sim.config import (
    EOS_TOKEN_ID,
    FAULT_KINDS,
    OPENAI_REASONING,
    OPENAI_STREAM_ENDS,
    SERVER_DEFAULT_MAX_NEW_TOKENS,
    Faults,
    LengthProfile,
    SimConfig,
    SimStats,
    apply_config_patch,
)
from gen_tui.backends.sim.server import SimServer, create_app

__all__ = [
    "EOS_TOKEN_ID",
    "FAULT_KINDS",
    "OPENAI_REASONING",
    "OPENAI_STREAM_ENDS",
    "SERVER_DEFAULT_MAX_NEW_TOKENS",
    "Faults",
    "LengthProfile",
    "SimConfig",
    "SimServer",
    "SimStats",
    "apply_config_patch",
    "create_app",
    "main",
]
