"""A regenerated assistant answer's ids as a trainer sees them: the answer, then the chat
template's end-of-turn markup (Qwen's `<|im_end|>\\n`, Llama 3's `<|eot_id|>`), the stop
token SGLang left at the end of `output_ids` not doubled. One code path for `--turns last`
rows (formats.py, exporter.py) and every turn of a `--turns all` row (turns.py).

Why the markup is there: SpecForge 0.2.0's `GeneralParser` masks an assistant turn from after
its header through the template's `end_of_turn_token`, speculators 0.9.0's
`_render_boundary_rows` everything the render up to the turn adds after its generation prompt
(the same markup). A drafter trained without it never learns to propose the end of a turn.
SGLang 0.5.23's `output_ids` end with the stop token it matched (`finished_len` counts it),
the simulator's and an OpenAI path's do not: the answer's ids are taken without it and the
markup added from the template, so the row is the same on every path.

The markup comes from rendering the answer after its history, so a template whose markup
depends on the conversation gets its own. Rendering is the dearest part of it, and most
templates write the same markup after every answer: `Closer` checks that once per template
(two unlike conversations give the same markup) and then takes the markup from a render of
a one-message history, which costs the same whatever the record's length.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from gen_tui.backends.tokenizer import encode_text

Answer = str | Callable[[], str]
"""An answer's text, or a function giving it (decoding ids is not free)."""

MARK = "\ue000gen-tui:end-of-turn\ue000"
"""Put after an assistant answer to find where its rendered span ends (a private-use
character no template strips; removed before tokenizing)."""

_PROBES: tuple[list[dict[str, str]], ...] = (
    [{"role": "user", "content": "a"}],
    [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "d"},
    ],
)
"""Two unlike histories: a template that closes an answer the same after both is taken to
close every answer so (`Closer`)."""


def end_of_turn(tokenizer: Any, history: list[dict[str, str]], answer: str) -> str:
    """The template's markup after an assistant answer that ends the conversation (Qwen's
    `<|im_end|>\\n`, Llama 3's `<|eot_id|>`): what follows the answer in the render of
    `history` and the answer, empty when the template renders nothing after it."""
    turn = {"role": "assistant", "content": answer + MARK}
    text = str(tokenizer.apply_chat_template([*history, turn], tokenize=False))
    at = text.rfind(MARK)
    return text[at + len(MARK) :] if at >= 0 else ""


def _special_ids(tokenizer: Any) -> frozenset[int]:
    return frozenset(getattr(tokenizer, "all_special_ids", ()))


class Closer:
    """`closed` for one tokenizer, its template's markup found once where it does not
    depend on the conversation (see the module's text); make one per tokenizer and export."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.template = getattr(tokenizer, "chat_template", None)
        self._special = _special_ids(tokenizer)
        self._fixed: list[int] | None = None
        self._checked = False

    def _fixed_tail(self) -> list[int] | None:
        if not self._checked:
            self._checked = True
            try:
                tails = {end_of_turn(self.tokenizer, history, "x") for history in _PROBES}
            except Exception:  # a template can raise anything on odd input
                tails = set()
            if len(tails) == 1:
                self._fixed = encode_text(self.tokenizer, tails.pop())
        return self._fixed

    def tail(self, history: list[dict[str, str]], answer: Answer) -> list[int]:
        """The ids of the template's markup after `answer` following `history` (`answer`
        may be a function giving it: it is not needed where the markup is fixed); raises
        what the template raises."""
        fixed = self._fixed_tail()
        if fixed is not None:
            return fixed
        text = answer if isinstance(answer, str) else answer()
        return encode_text(self.tokenizer, end_of_turn(self.tokenizer, history, text))

    def closed(
        self,
        history: list[dict[str, str]],
        answer: Answer,
        output_ids: list[int],
        before: list[int] | None = None,
    ) -> list[int]:
        """`output_ids` of `answer` (a reply to `history`) as the row trains them, after
        `before` (the row's ids before the answer, joined in the same copy: an answer's
        ids run to thousands): without the stop token SGLang leaves at their end (0.5.23's
        `finished_len` counts the token it matched), then the template's end-of-turn
        markup, whole and once. The stop is the markup's first token (Qwen's `<|im_end|>`)
        or another special token the model may also stop on (`<|endoftext|>`), which the
        template, rendering the answer's text, would not write either. Raises what the
        template raises."""
        tail = self.tail(history, answer)
        ids = (before or []) + output_ids
        if output_ids and ((tail and output_ids[-1] == tail[0]) or output_ids[-1] in self._special):
            ids.pop()
        ids += tail
        return ids


_CLOSERS: weakref.WeakKeyDictionary[Any, Closer] = weakref.WeakKeyDictionary()


def closer(tokenizer: Any) -> Closer:
    """The `Closer` of `tokenizer` as its chat template is now (a test may set another)."""
    try:
        made = _CLOSERS.get(tokenizer)
        if made is None or made.template != getattr(tokenizer, "chat_template", None):
            made = _CLOSERS[tokenizer] = Closer(tokenizer)
    except TypeError:  # a tokenizer no weak reference or hash takes: a Closer of its own
        made = Closer(tokenizer)
    return made
