"""A thinking model's `--turns all` conversation as one specforge row (issue 35): the chat
template keeps only the last turn's reasoning (Qwen3's rule), so turn k+1's prompt does not
continue turn k's answer ids; the row is the whole conversation as the template renders it
and every assistant turn's span is in the loss mask, reasoning where the template keeps it.
Real tokenizer (the tests' trained one) with that template."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.export.turns import Built, Conversation, build
from gen_tui.backends.store.prompts import Prompt
from gen_tui.backends.tokenizer import encode_text, load_tokenizer
from tests.support.turns import mask_runs

# Qwen3's rule: an assistant turn's reasoning is rendered only after the last user turn.
LAST_REASONING = (
    "{%- set ns = namespace(last=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last = loop.index0 %}"
    "{%- endif %}{%- endfor %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}{{- '<|assistant|>\\n' }}"
    "{%- if loop.index0 > ns.last and m.reasoning_content is string %}"
    "{{- '<think>\\n' + m.reasoning_content + '\\n</think>\\n\\n' }}{%- endif %}"
    "{{- m.content + '<|end|>\\n' }}"
    "{%- else %}{{- '<|' + m.role + '|>\\n' + m.content + '<|end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"
)
USERS = ["write a function", "explain how binary search works", "parse a json file"]
ANSWERS = ["the sum of two numbers", "describe the time complexity", "count the keys"]
REASONING = ["implement quicksort", "convert this sql query", "summarize the document"]


@pytest.fixture(scope="module")
def thinking(tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("thinking") / "tok"
    shutil.copytree(tokenizer_dir, folder)
    tokenizer = load_tokenizer(str(folder))
    tokenizer.chat_template = LAST_REASONING
    return tokenizer


def conversation(tokenizer: Any) -> Conversation:
    messages = [{"role": "system", "content": "summarize"}]
    for user in USERS:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": "old"}]
    records = []
    for turn, (text, reasoning) in enumerate(zip(ANSWERS, REASONING, strict=True), start=1):
        ids = encode_text(tokenizer, f"<think>\n{reasoning}\n</think>\n\n{text}")
        records.append({"turn": turn, "text": text, "reasoning": reasoning, "output_ids": ids})
    return Conversation("chat", Prompt("c-1", messages, 1), records)


def test_every_turn_is_in_the_mask_as_the_template_renders_the_whole(thinking: Any) -> None:
    built = build(conversation(thinking), thinking, None, ids=True)
    assert isinstance(built, Built), built
    assert built.turns == 3
    rendered = thinking.apply_chat_template(built.conversation, tokenize=True, return_dict=False)
    assert built.input_ids == list(rendered)
    last = f"<think>\n{REASONING[-1]}\n</think>\n\n{ANSWERS[-1]}"
    assert mask_runs(thinking, {"input_ids": built.input_ids, "loss_mask": built.loss_mask}) == [
        *ANSWERS[:-1],
        last,
    ]
    # Everything else (system, users, headers, end-of-turn markup) is out of the mask.
    unmasked = [t for t, bit in zip(built.input_ids, built.loss_mask, strict=True) if not bit]
    assert all(user in thinking.decode(unmasked) for user in USERS)
    assert ANSWERS[0] not in thinking.decode(unmasked)


def test_max_length_cuts_whole_turns_and_the_kept_last_turn_has_its_reasoning(
    thinking: Any,
) -> None:
    whole = build(conversation(thinking), thinking, None, ids=True)
    assert isinstance(whole, Built)
    cut = build(conversation(thinking), thinking, len(whole.input_ids) - 1, ids=True)
    assert isinstance(cut, Built), cut
    assert cut.turns == 2 and len(cut.input_ids) < len(whole.input_ids)
    row = {"input_ids": cut.input_ids, "loss_mask": cut.loss_mask}
    assert mask_runs(thinking, row) == [
        ANSWERS[0],
        f"<think>\n{REASONING[1]}\n</think>\n\n{ANSWERS[1]}",
    ]
    assert build(conversation(thinking), thinking, 5, ids=True) == "over --max-length"
