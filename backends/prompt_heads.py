"""The head of the prompt each shown answer answered, for the sample viewer (`v`).

Why a scan of the prompt file: a record keeps its `sample_id` and its prompt's length
(`prompt_tokens`), not the prompt (neither its text nor its ids: the prompt file is the
data's source and records stay small), so the prompt is looked up in the prompt file by
the same key the engine used (`Prompt.key`). The scan is bounded (PROMPT_SCAN_BYTES, lines
capped like the feeder's) and stops once every wanted sample is found; it blocks on the
disk, so callers run it in a worker. The text is the prompt file's, so it is cleaned
(`untrusted.clean`) and cut to PROMPT_HEAD_CHARS.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gen_tui.backends.prompts import MAX_LINE_BYTES, _lines, parse_prompt
from gen_tui.backends.untrusted import clean, one_line

PROMPT_HEAD_CHARS = 300
"""The most characters of a prompt shown above its answer: enough to know the question."""
PROMPT_SCAN_BYTES = 256 << 20
"""The most bytes of a prompt file read to find the shown samples (a second or two)."""


@dataclass(frozen=True)
class PromptHeads:
    """The head of each found prompt by sample key, and what to say for the others."""

    heads: dict[str, str] = field(default_factory=dict)
    missing: str = ""
    """Why a sample has no head (no file here, not found within the bound, unreadable)."""


def head_of(messages: list[dict[str, str]], chars: int = PROMPT_HEAD_CHARS) -> str:
    """The last user turn (what the answer answers), cleaned and cut, with the turns before
    it counted rather than shown."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    index = users[-1] if users else len(messages) - 1
    text = messages[index].get("content", "") if messages else ""
    head = clean(text.strip(), chars)  # a cut is said: "… (n more characters)"
    before = index
    return f"(+{before} earlier message{'s' if before != 1 else ''}) {head}" if before else head


def prompt_heads(
    path: Path | None, keys: Iterable[str], why_none: str = "", max_bytes: int = PROMPT_SCAN_BYTES
) -> PromptHeads:
    """The heads of the prompts of `keys` in the prompt file `path` (None: `why_none`)."""
    wanted = set(keys)
    if path is None:
        return PromptHeads(missing=why_none or "the prompt file is not known here")
    heads: dict[str, str] = {}
    shown = one_line(str(path), 200)
    bounded = False
    try:
        with open(path, "rb") as handle:
            for line_no, raw in enumerate(_lines(handle, MAX_LINE_BYTES), start=1):
                if handle.tell() > max_bytes:
                    bounded = True
                    break
                if isinstance(raw, int) or not raw.strip():
                    continue
                try:
                    prompt = parse_prompt(raw, line_no)
                except ValueError:
                    continue  # the run said it at its start; here it is only not this one
                if prompt.key in wanted and prompt.key not in heads:
                    heads[prompt.key] = head_of(prompt.messages)
                    if len(heads) == len(wanted):
                        break
    except OSError as exc:
        return PromptHeads(heads, f"cannot read {shown}: {one_line(exc.strerror or str(exc))}")
    if bounded:
        size = f"{max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else f"{max_bytes:,} bytes"
        why = f"not in the first {size} of {shown} (the scan's bound)"
    else:
        why = f"not in {shown} (changed since the run?)"
    return PromptHeads(heads, why)
