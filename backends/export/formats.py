"""The trainer formats export writes: one JSON line per record, each in one function.

- `specforge`: pre-tokenized `input_ids` and `loss_mask` (0 over the prompt, 1 over the
  answer and the chat template's end-of-turn markup after it, as SpecForge masks its own
  render of the conversation: closing.py), what SpecForge reads from `data.prompts_path` and
  vLLM speculators writes and reads as its "speculator format".
- `sharegpt`: the prompt's messages and the answer as an assistant turn (with the model's
  thinking as `reasoning_content` when the record has it), what SpecForge's regeneration
  script writes and its offline pipeline reads.
- `text`: the whole conversation rendered by the run's chat template (SpecForge's
  `is_preformatted`).

Every row's `metadata` has the same fields of the same types (an Arrow-based reader such as
`datasets` refuses a column whose type changes between rows): `sample_id` is therefore
always a string, as in the row's `id`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gen_tui.backends.export.closing import closer
from gen_tui.backends.store.records import sample_key

FORMATS = ("specforge", "sharegpt", "text")


@dataclass(frozen=True, slots=True)
class Item:
    """One record with what export rebuilt for it: the prompt's messages and ids, and for
    a `specforge` row its ids: the prompt's, then the answer's as the row trains them
    (`closing.Closer.closed`: the template's end-of-turn markup after them)."""

    dataset: str
    record: dict[str, Any]
    messages: list[dict[str, str]]
    prompt_ids: list[int]
    input_ids: list[int] | None = None


@dataclass(frozen=True)
class RunFacts:
    """What every row of a dataset shares, from its manifest."""

    model: str | None
    sampling: dict[str, Any]


def row_id(item: Item) -> str:
    return f"{item.dataset}/{sample_key(item.record['sample_id'])}"


def answer_text(record: dict[str, Any], tokenizer: Any) -> str:
    """The answer's text: the record's own, else its ids decoded (a layout without text)."""
    text = record.get("text")
    if isinstance(text, str):
        return text
    return str(tokenizer.decode(record["output_ids"], skip_special_tokens=True))


def assistant_turn(item: Item, tokenizer: Any) -> dict[str, str]:
    turn = {"role": "assistant", "content": answer_text(item.record, tokenizer)}
    reasoning = item.record.get("reasoning")
    if isinstance(reasoning, str):
        turn["reasoning_content"] = reasoning
    return turn


def metadata(item: Item, facts: RunFacts) -> dict[str, Any]:
    record = item.record
    created = record.get("created")
    return {
        "dataset": item.dataset,
        "sample_id": sample_key(record["sample_id"]),
        "finish_reason": record.get("finish_reason"),
        "prompt_tokens": record.get("prompt_tokens"),
        "completion_tokens": record.get("completion_tokens"),
        "model": facts.model,
        "sampling": facts.sampling,
        "server": record.get("server") if isinstance(record.get("server"), str) else None,
        "time": float(created) if isinstance(created, int | float) else None,
    }


def specforge_row(item: Item, facts: RunFacts, tokenizer: Any) -> bytes:
    ids = item.input_ids
    if ids is None:  # an item made without them: the same closing (closing.py)
        text = answer_text(item.record, tokenizer)
        ids = closer(tokenizer).closed(
            item.messages, text, item.record["output_ids"], item.prompt_ids
        )
    prompt = len(item.prompt_ids)
    return orjson.dumps(
        {
            "id": row_id(item),
            "input_ids": ids,
            "loss_mask": [0] * prompt + [1] * (len(ids) - prompt),
            "metadata": metadata(item, facts),
        }
    )


def sharegpt_row(item: Item, facts: RunFacts, tokenizer: Any) -> bytes:
    return orjson.dumps(
        {
            "id": row_id(item),
            "conversations": [*item.messages, assistant_turn(item, tokenizer)],
            "metadata": metadata(item, facts),
        }
    )


def text_row(item: Item, facts: RunFacts, tokenizer: Any) -> bytes:
    text = tokenizer.apply_chat_template(
        [*item.messages, assistant_turn(item, tokenizer)], tokenize=False
    )
    return orjson.dumps({"id": row_id(item), "text": text, "metadata": metadata(item, facts)})


WRITERS: dict[str, Callable[[Item, RunFacts, Any], bytes]] = {
    "specforge": specforge_row,
    "sharegpt": sharegpt_row,
    "text": text_row,
}
