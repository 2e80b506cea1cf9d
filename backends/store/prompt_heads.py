"""The head of the prompt each shown answer answered, for the sample viewer (`v`).

Why a scan of the prompt file: a record keeps its `sample_id` and its prompt's length
(`prompt_tokens`), not the prompt (neither its text nor its ids: the prompt file is the
data's source and records stay small), so the prompt is looked up in the prompt file by
the same key the engine used. The lookup is the watcher's (`watcher.find_heads`, with the
one prompt-line rule, `watcher.prompt_fields`): here it runs in-process, and for a run on a
GPU box the watcher runs it there (`Host.prompt_heads`), so only the heads cross the link.
The scan is bounded (PROMPT_SCAN_BYTES, lines capped like the feeder's) and stops once every
wanted sample is found; it blocks on the disk, so callers run it in a worker. The text is
the prompt file's, so it is cleaned here (`untrusted.clean`), cut at PROMPT_HEAD_CHARS.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gen_tui.backends import watcher
from gen_tui.backends.untrusted import clean, cut_said, one_line
from gen_tui.backends.watcher import PROMPT_HEAD_CHARS, PROMPT_SCAN_BYTES

__all__ = ["PROMPT_HEAD_CHARS", "PROMPT_SCAN_BYTES", "PromptHeads", "head_of", "prompt_heads"]


@dataclass(frozen=True)
class PromptHeads:
    """The head of each found prompt by sample key, and what to say for the others."""

    heads: dict[str, str] = field(default_factory=dict)
    missing: str = ""
    """Why a sample has no head (no file here, not found within the bound, unreadable)."""

    @classmethod
    def of_report(
        cls, report: Mapping[str, Any] | None, max_bytes: int = PROMPT_SCAN_BYTES
    ) -> PromptHeads:
        """A watcher's `heads` line, whatever it holds: heads cleaned, the rest said."""
        if not isinstance(report, Mapping):
            return cls(missing="the host answered nothing usable")
        shown = one_line(str(report.get("path") or "the prompt file"), 200)
        if report.get("error"):
            return cls(missing=one_line(str(report["error"]), 300))
        found = report.get("heads")
        heads = {
            one_line(str(key), 200): _shown(head)
            for key, head in (found.items() if isinstance(found, Mapping) else ())
            if isinstance(head, Mapping)
        }
        if report.get("bounded"):
            size = f"{max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else f"{max_bytes:,} bytes"
            why = f"not in the first {size} of {shown} (the scan's bound)"
        else:
            why = f"not in {shown} (changed since the run?)"
        return cls(heads, why)


def _shown(head: Mapping[str, Any]) -> str:
    """One head as the viewer shows it: the turns before it counted, its text cleaned, a
    cut said (the watcher sends `before`, `text` and the whole length `chars`)."""
    text = str(head.get("text") or "")[: 4 * PROMPT_HEAD_CHARS]
    chars = head.get("chars")
    more = chars - len(text) if isinstance(chars, int) and not isinstance(chars, bool) else 0
    before = head.get("before")
    before = before if isinstance(before, int) and not isinstance(before, bool) else 0
    shown = cut_said(clean(text, len(text)), more)
    return f"(+{before} earlier message{'s' if before != 1 else ''}) {shown}" if before else shown


def head_of(messages: list[dict[str, str]], chars: int = PROMPT_HEAD_CHARS) -> str:
    """The last user turn (what the answer answers), cleaned and cut, with the turns before
    it counted rather than shown."""
    return _shown(watcher.last_user_turn(messages, chars))


def prompt_heads(
    path: Path | None, keys: Iterable[str], why_none: str = "", max_bytes: int = PROMPT_SCAN_BYTES
) -> PromptHeads:
    """The heads of the prompts of `keys` in the prompt file `path` on this machine (None:
    `why_none`). The path is the run's own (its config's or its manifest's); it is read by
    the rule the engine reads it by, here as on a GPU box (`watcher.open_named`)."""
    if path is None:
        return PromptHeads(missing=why_none or "the prompt file is not known here")
    try:
        report = watcher.find_heads(os.fspath(path), list(keys), max_bytes, loads=orjson.loads)
    except watcher.BadFile as exc:  # it names the path and says what it is
        return PromptHeads(missing=one_line(str(exc)))
    except OSError as exc:
        why = one_line(exc.strerror or str(exc))
        return PromptHeads(missing=f"cannot read {one_line(str(path), 200)}: {why}")
    return PromptHeads.of_report({**report, "path": str(path)}, max_bytes)
