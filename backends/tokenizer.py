"""Loading a transformers tokenizer and turning chat messages into input ids.

transformers costs about two seconds to import, so it is imported here, lazily, and only
ever called from worker threads: never on an event loop that must stay responsive.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gen_tui.backends.untrusted import truncate

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
"""A model directory holds at least one of these; without any, transformers' error is about
converting slow tokenizers, which tells the user nothing about the wrong path they gave."""
_REASON_CHARS = 400


class TokenizerError(Exception):
    """The tokenizer could not be loaded or cannot apply a chat template."""


def load_tokenizer(source: str) -> Any:
    """Load `source` (a local directory, or a hub id already in the local cache).

    Raises :class:`TokenizerError` with a one-line reason instead of transformers' traceback.
    """
    path = Path(source).expanduser()
    if path.exists() and not path.is_dir():
        raise TokenizerError(f"tokenizer {source!r} is a file; give the directory that holds it")
    if not path.exists() and not _HUB_ID.match(source):
        raise TokenizerError(f"tokenizer directory {source!r} does not exist")
    if path.is_dir() and not any((path / name).exists() for name in _TOKENIZER_FILES):
        raise TokenizerError(
            f"tokenizer directory {source!r} holds no tokenizer (none of "
            f"{', '.join(_TOKENIZER_FILES)}); give the served model's directory"
        )
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - a broken install
        raise TokenizerError(f"transformers is not importable: {exc}") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path) if path.exists() else source)
    except Exception as exc:  # transformers raises many unrelated types here
        # transformers' messages run over several lines ("...from one of:\n(1) ..."): the
        # first line alone can end mid-sentence, so the lines are joined, then bounded.
        text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        reason = truncate(text, _REASON_CHARS) if text else type(exc).__name__
        raise TokenizerError(f"cannot load tokenizer {source!r}: {reason}") from None
    if not getattr(tokenizer, "chat_template", None):
        raise TokenizerError(
            f"tokenizer {source!r} has no chat_template; prompts are chat messages and need one"
        )
    return tokenizer


def encode_messages(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Chat-template `messages` with a generation prompt, as the target model expects."""
    ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    return list(ids)


def encode_many(tokenizer: Any, conversations: list[list[dict[str, str]]]) -> list[Any]:
    """:func:`encode_messages` of each conversation, in one batch call where it can be.

    A batch renders the templates in Python but encodes them in one call to the Rust
    tokenizer, which releases the GIL: the event loop that waits for the GIL meanwhile gets
    it, and the batch costs about a third of the CPU per prompt of single calls. Each entry
    of the result is a list of ids, or the exception its conversation raised: one prompt the
    template chokes on fails alone, not its whole batch.
    """
    if not conversations:
        return []
    try:
        ids = tokenizer.apply_chat_template(
            conversations, add_generation_prompt=True, tokenize=True, return_dict=False
        )
    except Exception:  # a template can raise anything on odd input: find which one
        ids = None
    if ids is not None and len(ids) == len(conversations):
        return [list(one.tolist() if hasattr(one, "tolist") else one) for one in ids]
    out: list[Any] = []
    for messages in conversations:
        try:
            out.append(encode_messages(tokenizer, messages))
        except Exception as exc:
            out.append(exc)
    return out


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Ids of a generated answer as the target model would have produced them."""
    return list(tokenizer.encode(text, add_special_tokens=False))
