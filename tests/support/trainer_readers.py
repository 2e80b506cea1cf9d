"""The rules by which SpecForge and vLLM speculators accept a pre-tokenized row, restated.

Neither installs here (both pull torch; SpecForge also sglang), so their checks are
restated from their sources (SpecForge 0.2.0 `specforge/data/prompt_builder.py`, the JSONL
fast path of `prepare_prompt_tasks`; speculators 0.9.0
`speculators/data_generation/preprocessing.py`, the pass-through of speculator-format rows)
as an independent oracle. Each returns why a row would be refused or dropped, or None.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any


def _one_dimensional_ints(value: Any, name: str, binary: bool) -> str | None:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return f"{name} is not a sequence"
    items = list(value)
    if len(items) == 1 and isinstance(items[0], Sequence) and not isinstance(items[0], str):
        items = list(items[0])  # SpecForge accepts one level of batch nesting
    for item in items:
        if isinstance(item, Sequence) and not isinstance(item, str | bytes):
            return f"{name} is not one-dimensional"
        if not isinstance(item, Integral) or (name == "input_ids" and isinstance(item, bool)):
            return f"{name} holds a non-integer {item!r}"
        if binary and int(item) not in (0, 1):
            return f"{name} holds {item!r}, not 0 or 1"
    return None


def specforge_refusal(row: Any, max_length: int, min_loss_tokens: int = 1) -> str | None:
    """SpecForge: an object with both fields, integer lists of one length, not empty, and at
    least `min_loss_tokens` trained tokens within `max_length` (else the row is dropped)."""
    if not isinstance(row, dict):
        return "row is not an object"
    if "input_ids" not in row or "loss_mask" not in row:
        return "row lacks input_ids or loss_mask"
    for name, binary in (("input_ids", False), ("loss_mask", True)):
        if (problem := _one_dimensional_ints(row[name], name, binary)) is not None:
            return problem
    ids, mask = row["input_ids"], row["loss_mask"]
    if len(ids) != len(mask):
        return "input_ids and loss_mask differ in length"
    if not ids:
        return "empty token sequence"
    if sum(mask[:max_length]) < min_loss_tokens:
        return "dropped: too few trained tokens in the window"
    return None


def speculators_refusal(
    row: Any, max_length: int, minimum_valid_tokens: int | None = None
) -> str | None:
    """vLLM speculators: both columns present, equal lengths, and some supervised token
    within `max_length` (else "unsupervised", dropped), at least `minimum_valid_tokens`."""
    if not isinstance(row, dict) or not {"input_ids", "loss_mask"} <= row.keys():
        return "row lacks input_ids or loss_mask"
    ids, mask = row["input_ids"], row["loss_mask"]
    if len(ids) != len(mask):
        return "row shape mismatch"
    valid = sum(mask[:max_length])
    if valid == 0:
        return "dropped: unsupervised"
    if minimum_valid_tokens is not None and valid < minimum_valid_tokens:
        return "dropped: filtered"
    return None


def arrow_schema_problem(rows: list[dict[str, Any]]) -> str | None:
    """Both load JSONL through `datasets` (Arrow): a field's JSON type must not change
    between rows (null aside), or the load fails. Checked one level into `metadata`."""
    kinds: dict[str, set[str]] = {}
    for row in rows:
        flat = {**{k: v for k, v in row.items() if k != "metadata"}}
        flat.update({f"metadata.{k}": v for k, v in row.get("metadata", {}).items()})
        for key, value in flat.items():
            if value is not None:
                kind = (
                    "number"
                    if isinstance(value, int | float) and not isinstance(value, bool)
                    else type(value).__name__
                )
                kinds.setdefault(key, set()).add(kind)
    mixed = {key: sorted(found) for key, found in kinds.items() if len(found) > 1}
    return f"fields change type between rows: {mixed}" if mixed else None
