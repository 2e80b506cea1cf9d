"""Whole conversations regenerated turn by turn (`--turns all`, issue 35): the turns of a
prompt, the history each turn's request carries, and the key of a turn's record.

Why a module of its own: the engine (what to send), the resume (which turns are on disk),
verify (whole and in order) and export (every assistant turn in the loss mask) all need
the same rule for what "turn k of a conversation" is, and it must be one rule.

The rule: turn k is the k-th user message of the prompt line. Its request carries the
system prompt and the user turns 1..k as given, each earlier user turn followed by the
assistant answer regenerated for it; the source's own assistant turns are dropped (they
are another model's voice, which is the point of regenerating). A record's key is its
conversation's sample key and its turn number, so a turn that has a record is never sent
again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import orjson

from gen_tui.backends.store.record_scan import (
    TURN_MARK,
    open_records,
    record_lines,
    record_turn,
    sample_key,
    turn_key,
)

__all__ = [
    "TURN_MARK",
    "TurnOnDisk",
    "Turns",
    "turn_count",
    "turn_key",
    "turn_messages",
    "turns_on_disk",
]


class Turns(StrEnum):
    """Which assistant turns a run regenerates."""

    LAST = "last"
    """The answer to the last user turn, the earlier assistant turns kept as written."""
    ALL = "all"
    """Every assistant turn, in order, each request carrying the regenerated history."""


def turn_count(messages: list[dict[str, str]]) -> int:
    """How many turns a conversation has: its user messages."""
    return sum(1 for message in messages if message.get("role") == "user")


def turn_messages(
    messages: list[dict[str, str]], turn: int, answers: list[str]
) -> list[dict[str, str]]:
    """The messages of turn `turn`'s request (1-based): the system prompt and user turns
    1..`turn` as given, the source's assistant turns dropped, and after each earlier user
    turn j its regenerated answer `answers[j-1]` (`answers` holds at least `turn - 1`).

    Reasoning is not carried into the history: the chat templates of thinking models
    (Qwen3, DeepSeek-R1) drop an earlier turn's reasoning themselves, and an OpenAI path
    that sends it apart would have it refused by servers that do not know the field."""
    out: list[dict[str, str]] = []
    seen = 0
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            continue
        if role == "user":
            if seen >= turn:
                break
            if seen:
                out.append({"role": "assistant", "content": answers[seen - 1]})
            seen += 1
        out.append(message)
    return out


@dataclass(frozen=True, slots=True)
class TurnOnDisk:
    """One regenerated assistant turn as its record holds it (for a resumed history)."""

    turn: int
    text: str
    reasoning: str | None = None


def turns_on_disk(path: Path, keys: set[str]) -> dict[str, dict[int, TurnOnDisk]]:
    """The turns on disk of the conversations keyed in `keys` (partly done ones, on a
    resume): their answers are the next turn's history. Only lines naming a turn are
    parsed; a line that does not parse is the resume scan's to report, passed over here."""
    found: dict[str, dict[int, TurnOnDisk]] = {key: {} for key in keys}
    if not keys:
        return found
    with open_records(path) as handle:
        for _, _, line in record_lines(handle):
            if isinstance(line, int) or b'"turn":' not in line:
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            sample_id, turn = record.get("sample_id"), record_turn(record)
            if not isinstance(sample_id, str | int) or turn is None:
                continue
            turns = found.get(sample_key(sample_id))
            if turns is None:
                continue
            text = record.get("text")
            reasoning = record.get("reasoning")
            turns[turn[0]] = TurnOnDisk(
                turn[0],
                text if isinstance(text, str) else "",
                reasoning if isinstance(reasoning, str) else None,
            )
    return found
