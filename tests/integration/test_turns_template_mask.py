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

from gen_tui.backends.export.closing import closer
from gen_tui.backends.export.turns import Built, Conversation, build, rendered
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
END = "<|end|>\n"
"""The template's end-of-turn markup: in each turn's run of mask 1, after its answer, as
SpecForge's and speculators' own preparation put it (backends/export/turns.py)."""


@pytest.fixture(scope="module")
def thinking(tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("thinking") / "tok"
    shutil.copytree(tokenizer_dir, folder)
    tokenizer = load_tokenizer(str(folder))
    tokenizer.chat_template = LAST_REASONING
    return tokenizer


def conversation(tokenizer: Any, reasoning_from: int = 1) -> Conversation:
    """Three turns; those from `reasoning_from` on with reasoning (ids `<think>`..`</think>`
    then the answer), the earlier ones without."""
    messages = [{"role": "system", "content": "summarize"}]
    for user in USERS:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": "old"}]
    records: list[dict[str, Any]] = []
    for turn, (text, reasoning) in enumerate(zip(ANSWERS, REASONING, strict=True), start=1):
        if turn < reasoning_from:
            ids = encode_text(tokenizer, text)
            records.append({"turn": turn, "text": text, "output_ids": ids})
            continue
        ids = encode_text(tokenizer, f"<think>\n{reasoning}\n</think>\n\n{text}")
        records.append({"turn": turn, "text": text, "reasoning": reasoning, "output_ids": ids})
    return Conversation("chat", Prompt("c-1", messages, 1), records)


def test_every_turn_is_in_the_mask_as_the_template_renders_the_whole(thinking: Any) -> None:
    built = build(conversation(thinking), thinking, None, ids=True)
    assert isinstance(built, Built), built
    assert built.turns == 3
    whole = list(thinking.apply_chat_template(built.conversation, tokenize=True, return_dict=False))
    # The template's whole render, ended with the last turn's end-of-turn markup.
    assert built.input_ids == whole
    last = f"<think>\n{REASONING[-1]}\n</think>\n\n{ANSWERS[-1]}{END}"
    assert mask_runs(thinking, {"input_ids": built.input_ids, "loss_mask": built.loss_mask}) == [
        *(answer + END for answer in ANSWERS[:-1]),
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
        ANSWERS[0] + END,
        f"<think>\n{REASONING[1]}\n</think>\n\n{ANSWERS[1]}{END}",
    ]
    assert build(conversation(thinking), thinking, 5, ids=True) == "over --max-length"


@pytest.mark.parametrize("template", ["plain", "thinking"])
def test_both_paths_give_one_row_for_one_conversation(
    template: str, tokenizer_dir: Path, thinking: Any
) -> None:
    """A conversation whose turn prompts continue each other (the plain template; the
    thinking one when only the last turn has reasoning, which the template keeps) is built
    from its prompt and answer ids; the same conversation rendered whole by the template
    gives the same ids and mask: both end with the last turn's end-of-turn markup, in the
    mask as every turn's is (the render once kept it as mask 0 where the prefix rows had
    none, so the row depended on the path taken), and --max-length cuts the same turns."""
    tokenizer = thinking if template == "thinking" else load_tokenizer(str(tokenizer_dir))
    item = conversation(tokenizer, reasoning_from=3 if template == "thinking" else 4)
    answers = item.answers(tokenizer)
    by_ids = build(item, tokenizer, None, ids=True)
    by_render = rendered(item, tokenizer, None, answers)
    assert isinstance(by_ids, Built) and isinstance(by_render, Built), (by_ids, by_render)
    assert (by_ids.input_ids, by_ids.loss_mask) == (by_render.input_ids, by_render.loss_mask)
    assert by_ids.loss_mask[-1] == 1  # the row's last token is the last turn's markup
    row = {"input_ids": by_ids.input_ids, "loss_mask": by_ids.loss_mask}
    last = (
        ANSWERS[-1]
        if template == "plain"
        else f"<think>\n{REASONING[-1]}\n</think>\n\n{ANSWERS[-1]}"
    )
    assert mask_runs(tokenizer, row) == [*(answer + END for answer in ANSWERS[:-1]), last + END]
    cap = len(by_ids.input_ids) - 1
    cut_ids = build(item, tokenizer, cap, ids=True)
    cut_render = rendered(item, tokenizer, cap, answers)
    assert isinstance(cut_ids, Built) and isinstance(cut_render, Built)
    assert cut_ids.turns == cut_render.turns == 2
    assert (cut_ids.input_ids, cut_ids.loss_mask) == (cut_render.input_ids, cut_render.loss_mask)


@pytest.mark.parametrize("stop_token", ["<|end|>", "<|pad|>"])
def test_an_answer_ending_with_the_stop_token_sglang_matched_gives_the_same_row(
    tokenizer_dir: Path, stop_token: str
) -> None:
    """SGLang's `output_ids` end with the stop token it matched (`<|end|>` here, Qwen's
    `<|im_end|>`; or another special token it stops on, as Qwen's `<|endoftext|>`), the
    simulator's and an OpenAI path's do not: the row is the same, its end-of-turn markup
    in the mask once per turn."""
    tokenizer = load_tokenizer(str(tokenizer_dir))
    plain = conversation(tokenizer, reasoning_from=4)
    stop = tokenizer.convert_tokens_to_ids(stop_token)
    stopped = Conversation(
        plain.dataset,
        plain.prompt,
        [{**record, "output_ids": [*record["output_ids"], stop]} for record in plain.records],
    )
    without, with_stop = build(plain, tokenizer, None, True), build(stopped, tokenizer, None, True)
    assert isinstance(without, Built) and isinstance(with_stop, Built), (without, with_stop)
    assert (with_stop.input_ids, with_stop.loss_mask) == (without.input_ids, without.loss_mask)
    row = {"input_ids": without.input_ids, "loss_mask": without.loss_mask}
    assert mask_runs(tokenizer, row) == [answer + END for answer in ANSWERS]
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    assert without.input_ids.count(end) == len(USERS) * 2 + 1  # system, users, answers
    assert stop == end or stop not in without.input_ids


# A template whose end-of-turn markup depends on the conversation: with a system prompt
# the answer is closed by `<|end|>\n`, without one by `<|end|>` alone.
VARYING_END = (
    "{%- set ns = namespace(sys=false) %}"
    "{%- for m in messages %}{%- if m.role == 'system' %}{%- set ns.sys = true %}"
    "{%- endif %}{%- endfor %}"
    "{%- for m in messages %}{{- '<|' + m.role + '|>\\n' + m.content }}"
    "{%- if m.role == 'assistant' and not ns.sys %}{{- '<|end|>' }}"
    "{%- else %}{{- '<|end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"
)


@pytest.mark.parametrize("template", ["plain", "varying"])
def test_an_answer_is_closed_by_the_markup_its_own_render_has(
    template: str, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """`Closer` takes a template's end-of-turn markup once where two unlike conversations
    give the same (the plain template), and renders it per answer where they do not: each
    answer gets the markup the template writes after it in its own conversation, the
    stop token SGLang matched (`<|end|>`) not doubled."""
    folder = tmp_path / "tok"
    shutil.copytree(tokenizer_dir, folder)
    tokenizer = load_tokenizer(str(folder))
    if template == "varying":
        tokenizer.chat_template = VARYING_END
    closing = closer(tokenizer)
    stop = tokenizer.convert_tokens_to_ids("<|end|>")
    answer = encode_text(tokenizer, ANSWERS[0])
    for history in (
        [{"role": "user", "content": USERS[0]}],
        [{"role": "system", "content": "summarize"}, {"role": "user", "content": USERS[0]}],
    ):
        whole = tokenizer.apply_chat_template(
            [*history, {"role": "assistant", "content": ANSWERS[0]}], tokenize=False
        )
        prompt = tokenizer.apply_chat_template(history, tokenize=False, add_generation_prompt=True)
        expected = encode_text(tokenizer, whole[len(prompt) :])  # the answer and its markup
        assert closing.closed(history, ANSWERS[0], answer) == expected
        assert closing.closed(history, ANSWERS[0], [*answer, stop]) == expected
    assert closer(tokenizer) is closing
    assert (closing.tail([], "") == encode_text(tokenizer, END)) == (template == "plain")
