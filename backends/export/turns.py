"""Export of `--turns all` conversations: one row a conversation, every regenerated
assistant turn in the loss mask (issue 35).

How the ids are built: turn k's request was turn 1..k's history rendered by the run's chat
template (`conversations.turn_messages`), so the row is turn 1's prompt ids, then each
turn's answer ids and the template's end-of-turn markup after it (`<|im_end|>\\n`; mask 1),
and the template's ids between that and the next turn's generation prompt (mask 0): the part
of turn k+1's rendered prompt that follows everything before it.

That holds only if turn k+1's prompt starts with turn k's prompt, answer and end-of-turn
ids, which a template that re-renders the earlier turns otherwise breaks. A thinking model's
does: its template drops an earlier turn's reasoning from the history, where the answer's
ids hold it. Such a conversation's row is built as the template renders the whole
conversation instead (`rendered`: template-aware masking, what SpecForge itself does with
a conversation): every assistant turn's span of that render is in the mask, reasoning
where the template keeps it. Only a conversation the template renders in no stable way (an
earlier turn rendered differently once a later one follows) is skipped as an ids mismatch,
never exported with a mask off by a token. `sharegpt` and `text`, which carry messages,
export each turn with its `reasoning_content`.

Each turn's answer ids and markup come from `closing.Closer.closed`, as a `--turns last`
row's answer does: why the markup is in the mask (both trainers put it there when they
prepare the conversation themselves) and why SGLang's matched stop token is dropped is
said there. The row ends with the last turn's markup, as the trainers' renders do.

`--max-length` cuts whole turns: the row keeps the turns whose ids fit, and a conversation
whose first turn does not fit is skipped as over the length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gen_tui.backends.export.closing import MARK, closer
from gen_tui.backends.export.formats import RunFacts, answer_text
from gen_tui.backends.store.conversations import turn_messages
from gen_tui.backends.store.prompts import Prompt
from gen_tui.backends.store.records import sample_key
from gen_tui.backends.tokenizer import encode_many

UNFINISHED = "conversation unfinished"


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation's prompt line and its turn records, in turn order."""

    dataset: str
    prompt: Prompt
    records: list[dict[str, Any]]

    def answers(self, tokenizer: Any) -> list[str]:
        return [answer_text(record, tokenizer) for record in self.records]


@dataclass(frozen=True, slots=True)
class Built:
    """A conversation's row content, cut to the turns kept: the ids, the mask, the messages
    with every kept assistant turn."""

    turns: int
    input_ids: list[int]
    loss_mask: list[int]
    conversation: list[dict[str, str]]


def build(item: Conversation, tokenizer: Any, max_length: int | None, ids: bool) -> Built | str:
    """The row of `item`, or the reason it is skipped (`exporter`'s skip reasons). `ids`:
    the row carries input ids and a loss mask (specforge), which need every turn's prompt
    to start with the one before it and its answer's ids; the formats of messages do not,
    and cut at `max_length` by each turn's own prompt and answer."""
    answers = item.answers(tokenizer)
    closing = closer(tokenizer)
    turns = len(item.records)
    prompts = encode_many(
        tokenizer,
        [turn_messages(item.prompt.messages, turn, answers) for turn in range(1, turns + 1)],
    )
    row: list[int] = []
    mask: list[int] = []
    kept = 0
    for turn, (record, prompt_ids) in enumerate(zip(item.records, prompts, strict=True), 1):
        output_ids = record.get("output_ids")
        if isinstance(prompt_ids, Exception):
            return "prompt untokenizable"
        if not isinstance(output_ids, list):
            return "no output_ids"
        if ids and prompt_ids[: len(row)] != row:
            return rendered(item, tokenizer, max_length, answers)
        bridge = prompt_ids[len(row) :] if ids else []
        if ids:
            history = turn_messages(item.prompt.messages, turn, answers)
            try:
                output_ids = closing.closed(history, answers[turn - 1], output_ids)
            except Exception:  # a template can raise anything on odd input
                return "prompt untokenizable"
        length = (
            len(row) + len(bridge) + len(output_ids) if ids else len(prompt_ids) + len(output_ids)
        )
        if max_length is not None and length > max_length:
            break
        row += bridge + output_ids
        mask += [0] * len(bridge) + [1] * len(output_ids)
        kept += 1
    if kept == 0:
        return "over --max-length"
    return Built(kept, row, mask, _conversation(item, kept, answers))


def _conversation(item: Conversation, kept: int, answers: list[str]) -> list[dict[str, str]]:
    """The messages of turns 1..`kept`, each assistant turn with its reasoning."""
    messages = turn_messages(item.prompt.messages, kept, answers)
    last = {"role": "assistant", "content": answers[kept - 1]}
    conversation = [*messages, last]
    for turn_index, record in enumerate(item.records[:kept]):
        reasoning = record.get("reasoning")
        if isinstance(reasoning, str):
            _assistant(conversation, turn_index)["reasoning_content"] = reasoning
    return conversation


def rendered(
    item: Conversation, tokenizer: Any, max_length: int | None, answers: list[str]
) -> Built | str:
    """The row of the whole conversation as the chat template renders it, the most turns
    that fit `max_length`: `_render_masked` of turns 1..k for k from all down to 1. What
    `build` falls back to where turn k+1's prompt does not continue turn k's ids; where it
    does, both give the same ids and mask (tests/integration/test_turns_template_mask.py)."""
    for kept in range(len(item.records), 0, -1):
        conversation = _conversation(item, kept, answers)
        try:
            masked = _render_masked(tokenizer, conversation)
        except Exception:  # a template can raise anything on odd input
            return "prompt untokenizable"
        if masked is None:
            return "ids mismatch"
        ids, mask = masked
        if max_length is None or len(ids) <= max_length:
            return Built(kept, ids, mask, conversation)
    return "over --max-length"


def _render_masked(
    tokenizer: Any, conversation: list[dict[str, str]]
) -> tuple[list[int], list[int]] | None:
    """Ids of `conversation` rendered whole by the chat template, and a mask of 1 on each
    assistant turn's span: from the end of the generation prompt the template renders for
    that turn (the conversation before it, `add_generation_prompt=True`) to the end of its
    answer and the template's end-of-turn markup after it (`closing.end_of_turn`), as in the prefix
    rows (`build`); the render is cut after the last turn's markup. None when the render
    before a turn is not a prefix of the whole render, the markup after an answer is not
    the one the template ends a conversation with, or the tokenizer gives no offsets."""
    marked = [
        {**m, "content": m["content"] + MARK} if m["role"] == "assistant" else m
        for m in conversation
    ]
    whole = str(tokenizer.apply_chat_template(marked, tokenize=False))
    spans: list[tuple[int, int, int]] = []
    for index, message in enumerate(marked):
        if message["role"] != "assistant":
            continue
        head = str(
            tokenizer.apply_chat_template(
                marked[:index], tokenize=False, add_generation_prompt=True
            )
        )
        end = whole.find(MARK, len(head))
        if not whole.startswith(head) or end < 0 or (spans and len(head) < spans[-1][1]):
            return None
        partial = str(tokenizer.apply_chat_template(marked[: index + 1], tokenize=False))
        tail = partial[partial.rfind(MARK) + len(MARK) :]
        if not whole.startswith(tail, end + len(MARK)):
            return None
        spans.append((len(head), end, len(tail)))
    if whole.count(MARK) != len(spans):
        return None
    # Offsets in the text without the marks: each mark before a point shifts it left; a
    # span goes on over the end-of-turn markup after its mark.
    clean_spans = [
        (
            start - whole.count(MARK, 0, start) * len(MARK),
            end - whole.count(MARK, 0, end) * len(MARK) + tail,
        )
        for start, end, tail in spans
    ]
    text = whole.replace(MARK, "")
    try:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except (NotImplementedError, ValueError, TypeError):
        return None  # a slow tokenizer has no offsets
    ids = list(encoded["input_ids"])
    starts = [first for first, _ in encoded["offset_mapping"]]
    mask = [int(any(start <= first < end for start, end in clean_spans)) for first in starts]
    # The row ends with the last turn's end-of-turn markup, as the prefix rows do: anything
    # a template renders after it would be a tail of mask 0 only the rendered rows had.
    last_end = clean_spans[-1][1]
    kept = sum(1 for first in starts if first < last_end)
    return ids[:kept], mask[:kept]


def _assistant(conversation: list[dict[str, str]], index: int) -> dict[str, str]:
    """The `index`-th (0-based) assistant message of `conversation`."""
    return [m for m in conversation if m["role"] == "assistant"][index]


def metadata(item: Conversation, built: Built, facts: RunFacts) -> dict[str, Any]:
    """Every row's metadata has the same fields of the same types (see formats.py)."""
    kept = item.records[: built.turns]
    return {
        "dataset": item.dataset,
        "sample_id": sample_key(item.prompt.sample_id),
        "turns": built.turns,
        "finish_reasons": [str(record.get("finish_reason")) for record in kept],
        "completion_tokens": sum(int(record.get("completion_tokens") or 0) for record in kept),
        "model": facts.model,
        "sampling": facts.sampling,
    }


def row(fmt: str, item: Conversation, built: Built, facts: RunFacts, tokenizer: Any) -> bytes:
    """One conversation's line in format `fmt` (`formats.FORMATS`)."""
    row_id = f"{item.dataset}/{sample_key(item.prompt.sample_id)}"
    meta = metadata(item, built, facts)
    if fmt == "specforge":
        body: dict[str, Any] = {"input_ids": built.input_ids, "loss_mask": built.loss_mask}
    elif fmt == "sharegpt":
        body = {"conversations": built.conversation}
    else:
        body = {"text": tokenizer.apply_chat_template(built.conversation, tokenize=False)}
    return orjson.dumps({"id": row_id, **body, "metadata": meta})
