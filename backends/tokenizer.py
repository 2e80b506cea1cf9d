"""Loading a transformers tokenizer and turning chat messages into input ids.

transformers costs about two seconds to import, so it is imported here, lazily, and only
ever called from worker threads: never on an event loop that must stay responsive.

Every load refuses remote code, without asking: the folder a tokenizer comes from is often
named by someone else's file (a dataset's `run_manifest.json` in a shared output folder),
and an `auto_map` in its `tokenizer_config.json` would otherwise make transformers ask
"Do you wish to run the custom code? [y/N]" on our terminal, printing the folder's name raw,
and run that user's Python as us on a `y`. transformers' own log lines quote the folder
name too, so they go through the untrusted-text rule before they reach the terminal.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from gen_tui.backends.untrusted import one_line, truncate

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
"""A model directory holds at least one of these; without any, transformers' error is about
converting slow tokenizers, which tells the user nothing about the wrong path they gave."""
_REASON_CHARS = 400
_REMOTE_CODE = (
    "it asks to run Python code of its own (an auto_map in its config); gen-tui never runs "
    "a tokenizer's code: give a tokenizer that transformers itself can load"
)


class TokenizerError(Exception):
    """The tokenizer could not be loaded or cannot apply a chat template."""


class _OneLine(logging.Filter):
    """Makes each transformers log line one clean line: they quote folder names that
    someone else may have chosen (`ev\\e]52;c;...\\a`), which must not reach a terminal raw."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = one_line(record.getMessage()), None
        return True


def _clean_transformers_logs() -> None:
    """Put :class:`_OneLine` on transformers' log handlers (once; idempotent)."""
    for handler in logging.getLogger("transformers").handlers:
        if not any(isinstance(f, _OneLine) for f in handler.filters):
            handler.addFilter(_OneLine())


def missing_tokenizer(source: str) -> str | None:
    """Why `source` cannot be a tokenizer, judged from the file system alone (no import of
    transformers), or None. Why apart from :func:`load_tokenizer`: a run checks this before
    it contacts any server, so a mistyped `--tokenizer` is a usage error (exit 2) at once,
    as a missing `--prompts-dir` is, not a failure after the server lines."""
    path = Path(source).expanduser()
    try:
        exists = path.exists()
    except (OSError, ValueError):
        return None  # a bad name: load_tokenizer says why, with its own words
    if exists and not path.is_dir():
        return f"tokenizer {source!r} is a file; give the directory that holds it"
    if not exists and not _HUB_ID.match(source):
        return f"tokenizer directory {source!r} does not exist"
    return None


def load_tokenizer(source: str) -> Any:
    """Load `source` (a local directory, or a hub id already in the local cache).

    Raises :class:`TokenizerError` with a one-line reason instead of transformers' traceback.
    """
    path = Path(source).expanduser()
    try:  # a name the system refuses (too long, a NUL) is a bad name, not a crash
        path.exists()
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise TokenizerError(f"tokenizer {truncate(source, _REASON_CHARS)!r}: {why}") from None
    problem = missing_tokenizer(source)
    if problem is not None:
        raise TokenizerError(problem)
    if path.is_dir() and not any((path / name).exists() for name in _TOKENIZER_FILES):
        raise TokenizerError(
            f"tokenizer directory {source!r} holds no tokenizer (none of "
            f"{', '.join(_TOKENIZER_FILES)}); give the served model's directory"
        )
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - a broken install
        raise TokenizerError(f"transformers is not importable: {exc}") from None
    _clean_transformers_logs()
    try:
        # Never another user's code, never a question on the terminal: see the docstring.
        tokenizer = AutoTokenizer.from_pretrained(
            str(path) if path.exists() else source, trust_remote_code=False
        )
    except Exception as exc:  # transformers raises many unrelated types here
        # transformers' messages run over several lines ("...from one of:\n(1) ..."): the
        # first line alone can end mid-sentence, so the lines are joined, then bounded.
        text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        reason = one_line(text, _REASON_CHARS) if text else type(exc).__name__
        if "trust_remote_code" in text:  # its message quotes the folder name three times
            reason = _REMOTE_CODE
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


THINK_OPEN = "<think>\n"
THINK_CLOSE = "\n</think>\n\n"
"""How the Qwen3, DeepSeek-R1 and Kimi families write reasoning into a turn's content; used
for a template that has no `reasoning_content` of its own, and for the fallback."""
_END = "\ue000gen-tui:end-of-answer\ue000"
"""Put after the answer to find where the template's end-of-turn markup starts (a private-use
character no template strips, so it survives `trim` and friends; never tokenized)."""


def _render(tokenizer: Any, messages: list[dict[str, str]], **options: Any) -> str:
    text: str = tokenizer.apply_chat_template(messages, tokenize=False, **options)
    return text


def _turn_text(
    tokenizer: Any, messages: list[dict[str, str]], prompt: str, text: str, reasoning: str
) -> str | None:
    """The assistant turn as the template renders it after `prompt`, up to the end of the
    answer; None when no form keeps the reasoning.

    Two forms, in order: the `reasoning_content` field (Qwen3's, Kimi's and the trainers'
    own conversation format), then `<think>..</think>` before the answer in `content`. A
    form counts only when the full render begins with the generation prompt (so the turn
    is what comes after it) and the turn holds the reasoning: a template that drops the
    field, or strips the think block as DeepSeek-R1's does for past turns, is not used.
    """
    forms = (
        {"role": "assistant", "content": text + _END, "reasoning_content": reasoning},
        {"role": "assistant", "content": THINK_OPEN + reasoning + THINK_CLOSE + text + _END},
    )
    for turn in forms:
        full = _render(tokenizer, [*messages, turn])
        end = full.rfind(_END)
        if full.startswith(prompt) and end >= len(prompt):
            rendered = full[len(prompt) : end]
            # Looked for before the answer: a trace that is a substring of it proves nothing.
            before = rendered[: len(rendered) - len(text)] if rendered.endswith(text) else rendered
            if reasoning.strip() in before:
                return rendered
    return None


def encode_turn(
    tokenizer: Any, messages: list[dict[str, str]], text: str, reasoning: str | None
) -> list[int]:
    """Ids of a generated assistant turn, reasoning included, as the model produced them.

    Why: an OpenAI-compatible server hands back text, not ids, and a thinking model's trace
    comes apart from the answer; a trainer needs the ids of the whole turn as the chat
    template renders it (the model wrote `<think>`, its reasoning, `</think>`, then the
    answer), or the ids cover the answer alone while `completion_tokens` counts both.

    How: render the conversation with the assistant turn and take what follows the
    generation prompt (`add_generation_prompt=True`), up to the end of the answer. The
    template's end-of-turn markup after the answer (`<|im_end|>\\n`) is left out, as the
    model's stop token is not part of an answer's ids on either path. The ids are those of
    the whole render minus those of the prompt, checked to begin with them; where a token
    straddles that boundary the turn's text is tokenized alone. When no form of the
    template keeps the reasoning, the turn is `<think>\\n{reasoning}\\n</think>\\n\\n{text}`
    tokenized alone (the convention of those model families).

    Without reasoning the ids are the answer's alone, exactly as before: the generation
    prompt already holds whatever a template puts before an answer (Qwen3 with thinking
    off puts the empty think block there), so nothing else belongs to the turn.
    """
    if not reasoning:
        return encode_text(tokenizer, text)
    prompt = _render(tokenizer, messages, add_generation_prompt=True)
    turn = _turn_text(tokenizer, messages, prompt, text, reasoning)
    if turn is None:
        return encode_text(tokenizer, THINK_OPEN + reasoning + THINK_CLOSE + text)
    head = encode_text(tokenizer, prompt)
    whole = encode_text(tokenizer, prompt + turn)
    if whole[: len(head)] == head:
        return whole[len(head) :]
    return encode_text(tokenizer, turn)
