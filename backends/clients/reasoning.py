"""A thinking model's reasoning, in each shape OpenAI-compatible servers send it.

Servers send the thinking trace apart from the answer, each its own way: SGLang and vLLM
with a reasoning parser as `reasoning_content`, OpenRouter as `reasoning` and, for the same
text again, `reasoning_details` (a list of typed parts). A client that read `content` alone
lost the whole trace while `usage.completion_tokens` still counted it. The same fields come
whole on a message and piecewise on a stream's deltas, so one reader serves both.
"""

from __future__ import annotations

from typing import Any

from gen_tui.backends.clients.results import RequestFailed
from gen_tui.backends.clients.wire import typed

TEXT_FIELDS = ("reasoning_content", "reasoning")
"""Plain-text reasoning: SGLang's and vLLM's name, then OpenRouter's. Some servers send both
with the same text; the first one present is taken, never both."""
DETAILS = "reasoning_details"
DETAIL_TEXT = {"reasoning.text": "text", "reasoning.summary": "summary"}
"""OpenRouter's readable detail types and the key holding their text. Others (such as
`reasoning.encrypted`, an opaque blob for sending back) carry no text a trainer can use."""


def _details(container: dict[str, Any], where: str) -> str | None:
    """The readable text of `reasoning_details`, joined; None when it has none."""
    details = typed(container, DETAILS, list, where)
    if not details:
        return None
    texts = []
    for detail in details:
        if not isinstance(detail, dict):
            raise RequestFailed(
                f"{where} has a {DETAILS} entry of type {type(detail).__name__}", retry=True
            )
        # checked first: an unhashable `type` (a list) made .get raise a bare TypeError
        key = DETAIL_TEXT.get(typed(detail, "type", str, f"{where}'s {DETAILS} entry"))
        if key is not None:
            texts.append(typed(detail, key, str, f"{where}'s {DETAILS} entry") or "")
    return "".join(texts) or None


def reasoning_of(container: dict[str, Any], where: str) -> str | None:
    """The reasoning one message (or one stream delta) carries, or None.

    Every field present is type-checked, used or not, so a server sending garbage costs an
    attempt with a named reason. OpenRouter sends the text both as `reasoning` and inside
    `reasoning_details`: the details are read only when no text field has any, so the trace
    is never doubled.
    """
    found = None
    for key in TEXT_FIELDS:
        value = typed(container, key, str, where)
        if value and found is None:
            found = value
    details = _details(container, where)
    return found if found is not None else details
