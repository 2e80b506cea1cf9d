"""Search in a long text view: every match highlighted, one of them current, and the row it
is drawn on once wrapped, so the view can scroll to it (`/`, `n`, `N` in `v` and `L`).

The text searched is what the view shows, as plain text: what was typed is matched as
characters (never markup, never a pattern), in any case, and the matches are marked with
styles on the `Text`, never by writing markup into it. The row is counted the way Textual
wraps a widget's content (`Content.wrap`, word by word, folding a word longer than the
width): greedy wrapping is the same for a prefix as for the whole, so the row of a match is
the last row of the text up to the end of its word.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.text import Text
from textual.content import Content

MATCH_STYLE = "black on yellow"
CURRENT_STYLE = "bold black on dark_orange"


@dataclass
class Finder:
    """The matches of one needle in one text, and which of them is current."""

    needle: str = ""
    plain: str = ""
    starts: list[int] = field(default_factory=list)
    """Where each match begins in `plain`, in order."""
    current: int = -1
    """The index in `starts` of the match shown (-1: none)."""
    _rows_before: dict[int, list[int]] = field(default_factory=dict)
    """Per width: the rows above each line of `plain` (wrapping it again on every `n`
    would be most of the key's time on twenty long answers)."""

    def search(self, text: Text | str, needle: str) -> int:
        """Look for `needle` (any case; "" finds nothing) in `text`, keeping the current
        match where it was if it still matches. Returns how many there are."""
        plain = text.plain if isinstance(text, Text) else text
        was = self.starts[self.current] if 0 <= self.current < len(self.starts) else None
        if plain != self.plain:
            self._rows_before.clear()
        self.needle, self.plain = needle, plain
        self.starts = []
        wanted = needle.lower()
        if wanted:
            haystack = plain.lower()
            at = haystack.find(wanted)
            while at >= 0:
                self.starts.append(at)
                at = haystack.find(wanted, at + len(wanted))
        if not self.starts:
            self.current = -1
        elif was is None:
            self.current = 0
        else:
            self.current = min(bisect.bisect_left(self.starts, was), len(self.starts) - 1)
        return len(self.starts)

    def step(self, by: int) -> int:
        """Make the next (`by` 1) or previous (-1) match current, round the end; returns
        its index (-1 if there is none)."""
        if self.starts:
            self.current = (self.current + by) % len(self.starts)
        return self.current

    def marked(self, text: Text) -> Text:
        """`text` with every match highlighted and the current one apart (a copy)."""
        if not self.starts:
            return text
        out = text.copy()
        size = len(self.needle)
        for index, start in enumerate(self.starts):
            style = CURRENT_STYLE if index == self.current else MATCH_STYLE
            out.stylize(style, start, start + size)
        return out

    def status(self) -> str:
        """One line: where the search is, e.g. `“gpu”: 3 of 17 · n next · N previous`."""
        if not self.needle:
            return ""
        if not self.starts:
            return f"“{self.needle}”: no match"
        return f"“{self.needle}”: {self.current + 1} of {len(self.starts)} · n next · N previous"

    def row(self, width: int) -> int | None:
        """The row (from 0) the current match is drawn on when the text is wrapped at
        `width` columns; None if there is no current match."""
        if self.current < 0 or width <= 0:
            return None
        start = self.starts[self.current]
        line_start = self.plain.rfind("\n", 0, start) + 1
        before = self._rows_before.get(width)
        if before is None:
            before = [0]
            for line in self.plain.split("\n"):
                before.append(before[-1] + _rows(line, width))
            self._rows_before[width] = before
        rows = before[self.plain.count("\n", 0, line_start)]
        end = start + len(self.needle)
        while end < len(self.plain) and not self.plain[end].isspace():
            end += 1  # to the end of its word: where greedy wrapping decides its row
        return rows + _rows(self.plain[line_start:end], width) - 1


def _rows(line: str, width: int) -> int:
    """The rows one line (no newline in it) takes wrapped at `width`."""
    if cell_len(line) <= width:
        return 1
    return max(1, len(Content(line).wrap(width)))
