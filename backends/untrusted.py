"""Text that someone else wrote: what it may look like before a terminal or a log shows it.

gen-tui shows command lines of other users' processes, messages from progress.json files,
sample ids from prompt files and error bodies from servers. Any of them may carry terminal
escape sequences (an OSC 52 write to the clipboard, a new window title, cursor moves),
bidirectional overrides that make a command read differently from what runs, or megabytes
of text. Everything from a file, a process or a server goes through :func:`clean` (or
:func:`one_line`) before it is shown or logged. Markup is the renderer's business: widgets
draw such text as plain `Text`, never through Rich markup.
"""

from __future__ import annotations

import re

SHOWN_CHARS = 2000
"""The most characters of one untrusted string that are shown or logged whole."""

QUOTED_CHARS = 500
"""The most characters of a reason quoted inside a longer line (a record rule's reason
quotes the bad value itself, which may be megabytes): the line around it stays whole."""

STORED_CHARS = 4096
"""The most characters of one server error kept in errors.jsonl (head kept, cut said)."""

QUOTED_BODY_BYTES = 200
"""The most bytes of a body quoted raw when no message can be read from it (a proxy's HTML
page, a JSON body cut at the read bound): enough to tell what answered."""

# C0 controls but tab and newline, DEL, C1 controls, the Unicode bidirectional
# embeddings, overrides and isolates (the "trojan source" characters), and lone surrogates:
# the bytes of a command line or path that are not UTF-8, kept as surrogate escapes so that
# identity checks and relaunches see the real bytes, which no terminal encoding can write.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_CONTROLS_AND_BREAKS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)


_COLOURS = re.compile("\x1b\\[[0-9;]*m")
"""SGR sequences: a log's colours (sglang-router, uvicorn and tqdm colour theirs)."""


def without_colours(text: str) -> str:
    """`text` without its colour sequences: harmless formatting a log's writer added, dropped
    so the line reads (every other escape still goes through :func:`clean`/:func:`one_line`
    and shows as a symbol)."""
    return _COLOURS.sub("", text)


def truncate(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, the head kept and the cut said."""
    if len(text) <= limit:
        return text
    return cut_said(text[:limit], len(text) - limit)


def cut_said(head: str, more: int) -> str:
    """`head` of a text cut elsewhere (on another machine), with the `more` characters
    left out said as :func:`truncate` says them."""
    return f"{head}… ({more:,} more characters)" if more > 0 else head


def quote_body(head: bytes, size: int | None, limit: int = QUOTED_BODY_BYTES) -> str:
    """The first `limit` bytes of a body of which `head` was read, saying what was left out.

    `size` is the whole body's size in bytes when known (`len(head)` when it was read to its
    end, or a declared Content-Length); None when reading stopped after `head` with more to
    come. Why say it: a quote that looks whole is taken for the server's whole message, and
    a 1 MB error page cut to its first line reads as a different error.
    """
    text = head[:limit].decode("utf-8", "replace").strip()
    if size is None:
        return f"{text}… (body over {_bytes(len(head))}, first {min(limit, len(head)):,} bytes)"
    cut = size - min(limit, len(head))
    return f"{text}… (+{cut:,} bytes cut)" if cut > 0 else text


def _bytes(size: int) -> str:
    """`size` as a reader counts it: 65,536 bytes are "64 KiB"."""
    return f"{size >> 10:,} KiB" if size >= 1024 and size % 1024 == 0 else f"{size:,} bytes"


def clean(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` without control characters (tab and newline kept), at most about `limit`."""
    return _CONTROLS.sub("\ufffd", truncate(text, limit))


def one_line(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` as one line: every control character and line break shown as a symbol."""
    return _CONTROLS_AND_BREAKS.sub(_visible, truncate(text, limit))


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    return " " if char in "\t\n\r" else "\ufffd"
