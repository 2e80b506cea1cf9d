"""A dataset's last answers, as the sample viewer shows them: parsed, decoded, made safe.

Why: counts say how much was made, not whether it is good; a look at the last few answers
does. The lines come from the end of the record file (`Host.tail_records`); each becomes a
:class:`Sample` whose texts went through `untrusted.clean` (a server's text may carry
terminal escapes) and are cut to a bound. A record without `text` (SGLang's native path
keeps ids only) is decoded with the run's tokenizer when one is at hand: callers run this
in a worker, never on the UI's loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from gen_tui.backends.bounds import COUNT, SECONDS
from gen_tui.backends.store.record_scan import record_turn
from gen_tui.backends.untrusted import clean, one_line

TEXT_CHARS = 6000
"""The most characters of one answer (or reasoning) shown; the cut is said."""
DEFAULT_SAMPLES = 20


@dataclass(frozen=True)
class Sample:
    """One answer, ready to show (every string cleaned and bounded)."""

    sample_id: str
    finish_reason: str
    tokens: int | None
    prompt_tokens: int | None
    latency_s: float | None
    answer: str
    reasoning: str | None
    source: str
    """Where the answer text came from: "text", "decoded" or "" (neither: ids only)."""
    turn: tuple[int, int] | None = None
    """With `--turns all`: (turn, turns) of its conversation this answer is."""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    """A token count as the viewer shows it: a whole number in the COUNT range (bounds.py),
    else none (a record's 400-digit count would draw a 400-digit figure)."""
    return value if _int(value) is not None and COUNT.check(value) is not None else None


def parse_sample(line: str, tokenizer: Any = None) -> Sample | None:
    """The sample of one record line; None for a line that is no record object."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    text, source = record.get("text"), "text"
    if not isinstance(text, str):
        text, source = None, ""
        ids = record.get("output_ids")
        usable = isinstance(ids, list) and all(_int(i) is not None for i in ids)
        if tokenizer is not None and usable:
            try:
                text, source = tokenizer.decode(ids), "decoded"
            except Exception:  # a tokenizer fails in its own ways: show no text, not a crash
                text = None
    reasoning = record.get("reasoning")
    latency = record.get("latency_s")
    return Sample(
        sample_id=one_line(str(record.get("sample_id", "?")), 80),
        finish_reason=one_line(str(record.get("finish_reason", "?")), 40),
        tokens=_count(record.get("completion_tokens")),
        prompt_tokens=_count(record.get("prompt_tokens")),
        latency_s=SECONDS.check(latency),  # 1e308 drew a 309-digit figure
        answer=clean(text, TEXT_CHARS) if text is not None else "",
        reasoning=clean(reasoning, TEXT_CHARS) if isinstance(reasoning, str) else None,
        source=source,
        turn=record_turn(record),
    )


def parse_samples(lines: Iterable[str], tokenizer: Any = None) -> list[Sample]:
    """The samples of `lines`, newest first; lines that are no record are left out."""
    samples = [parse_sample(line, tokenizer) for line in lines]
    return [sample for sample in reversed(samples) if sample is not None]
