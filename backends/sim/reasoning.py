"""A thinking model on the simulator's `/v1`: which tokens are reasoning, and how each server
words them.

A thinking model writes its trace first and its answer after; an OpenAI-compatible server
with a reasoning parser sends the trace apart from `content`, in one of several shapes
(`SimConfig.openai_reasoning`, see OPENAI_REASONING), and counts both in
`usage.completion_tokens`. Here the first half of each planned completion is the trace: a
completion cut by `max_tokens` may then be all reasoning, as a real one can be.
"""

from __future__ import annotations

from typing import Any

from gen_tui.backends.sim.config import SimConfig
from gen_tui.backends.sim.slots import Job

__all__ = ["ENCRYPTED", "reasoning_fields", "reasoning_tokens"]

ENCRYPTED = {"type": "reasoning.encrypted", "data": "c2ltdWxhdGVkIG9wYXF1ZSBibG9i", "index": 1}
"""What OpenRouter adds for providers that hide their trace: opaque, no text to keep."""


def reasoning_tokens(config: SimConfig, job: Job) -> int:
    """How many of the job's planned tokens are reasoning (none without a thinking profile)."""
    return 0 if config.openai_reasoning == "none" else len(job.output_ids) // 2


def reasoning_fields(shape: str, text: str, *, whole: bool) -> dict[str, Any]:
    """The fields that carry `text` in a message (`whole`) or a stream delta, in `shape`."""
    detail = {"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}
    if shape == "reasoning_content":
        return {"reasoning_content": text}
    if shape == "reasoning":
        return {"reasoning": text}
    if shape == "reasoning_details":
        return {"reasoning_details": [detail, ENCRYPTED] if whole else [detail]}
    if shape == "openrouter":
        return {"reasoning": text, "reasoning_details": [detail]}
    raise ValueError(f"no reasoning shape {shape!r}")
