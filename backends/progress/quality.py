"""A dataset's data quality while it runs: finish reasons, answer lengths, latency, errors.

Why: a night's run can reach its token count and still be poor data (answers cut at their
cap, a server that answers in 90 s, one error repeated 10,000 times). The engine counts
each answer here as it is written; the snapshot and progress.json carry the counts, so a
panel on this machine or over SSH draws the same figures. Everything is bounded whatever
the run's length: fixed histogram buckets, a capped number of distinct finish reasons and
error reasons (the rest folded into "other"), reason texts cut short. The figures cover
this run's answers (like the truncated count), not those resumed from the file.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from gen_tui.backends.untrusted import one_line

LENGTH_EDGES: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
"""Upper bounds (exclusive) of the answer-length buckets; one more bucket holds the rest."""
LATENCY_EDGES: tuple[float, ...] = tuple(round(0.05 * 1.25**i, 4) for i in range(48))
"""Upper bounds of the latency buckets: 50 ms to about 2.6 h, 25 % apart, so a quantile read
from them is within a quarter of the true one, in a fixed 49 numbers."""
MAX_REASONS = 6
"""Distinct finish reasons kept; any further are counted as "other"."""
MAX_ERROR_KINDS = 32
"""Distinct error reasons counted; any further are counted as "other"."""
TOP_ERRORS = 5
"""Error reasons published (the most frequent)."""
REASON_CHARS = 80
"""The most characters of one reason kept (finish or error): a key, not a report."""
OTHER = "other"


def _bucket(edges: Sequence[float], value: float) -> int:
    for index, edge in enumerate(edges):
        if value < edge:
            return index
    return len(edges)


@functools.lru_cache(maxsize=64)
def _reason(text: str) -> str:
    """Cached: a run's answers carry two or three reasons, asked once per answer."""
    return one_line(text.strip(), REASON_CHARS) or "?"


def _capped_add(counter: Counter[str], key: str, limit: int) -> None:
    if key in counter or len(counter) < limit:
        counter[key] += 1
    else:
        counter[OTHER] += 1


@dataclass(frozen=True, slots=True)
class Quality:
    """The published figures of one dataset (plain, bounded, comparable)."""

    answers: int = 0
    finish: tuple[tuple[str, int], ...] = ()
    """(finish_reason, count), most frequent first."""
    lengths: tuple[int, ...] = ()
    """Answers per LENGTH_EDGES bucket (len(LENGTH_EDGES) + 1 of them, or none yet)."""
    latency: tuple[int, ...] = ()
    """Answers per LATENCY_EDGES bucket, for the quantiles."""
    errors: tuple[tuple[str, int], ...] = ()
    """The TOP_ERRORS most frequent reasons a sample was given up, with counts."""

    def latency_quantile(self, q: float) -> float | None:
        """The latency under which a share `q` of answers came (a bucket's upper bound)."""
        total = sum(self.latency)
        if not total:
            return None
        rank, seen = q * total, 0
        for index, count in enumerate(self.latency):
            seen += count
            if seen >= rank and count:
                return LATENCY_EDGES[min(index, len(LATENCY_EDGES) - 1)]
        return LATENCY_EDGES[-1]

    def to_json(self) -> dict[str, Any]:
        return {
            "answers": self.answers,
            "finish": [list(pair) for pair in self.finish],
            "lengths": list(self.lengths),
            "latency": list(self.latency),
            "errors": [list(pair) for pair in self.errors],
        }

    @classmethod
    def parse(cls, value: Any) -> Quality | None:
        """A progress.json's `quality`, taken field by field; None when it is no object.

        The file may come from another version or be hand-made: a list of the wrong length
        or with odd members is dropped, strings are cleaned and cut, counts must be >= 0.
        """
        if not isinstance(value, Mapping):
            return None
        answers = value.get("answers")
        return cls(
            answers=answers if _count(answers) else 0,
            finish=_pairs(value.get("finish"), MAX_REASONS + 1),
            lengths=_counts(value.get("lengths"), len(LENGTH_EDGES) + 1),
            latency=_counts(value.get("latency"), len(LATENCY_EDGES) + 1),
            errors=_pairs(value.get("errors"), TOP_ERRORS),
        )


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _counts(value: Any, length: int) -> tuple[int, ...]:
    if isinstance(value, list) and len(value) == length and all(map(_count, value)):
        return tuple(value)
    return ()


def _pairs(value: Any, limit: int) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, list):
        return ()
    pairs = []
    for item in value[:limit]:
        good = isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
        if good and _count(item[1]):
            pairs.append((_reason(item[0]), item[1]))
    return tuple(pairs)


@dataclass
class QualityWatch:
    """One dataset's running counts (the engine's side): O(1) per answer, bounded memory."""

    finish: Counter[str] = field(default_factory=Counter)
    lengths: list[int] = field(default_factory=lambda: [0] * (len(LENGTH_EDGES) + 1))
    latency: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_EDGES) + 1))
    errors: Counter[str] = field(default_factory=Counter)
    answers: int = 0
    _published: Quality | None = None

    def answer(self, tokens: int, finish_reason: str | None, latency_s: float | None) -> None:
        self.answers += 1
        _capped_add(self.finish, _reason(finish_reason or "?"), MAX_REASONS)
        self.lengths[_bucket(LENGTH_EDGES, tokens)] += 1
        if latency_s is not None and latency_s >= 0:
            self.latency[_bucket(LATENCY_EDGES, latency_s)] += 1
        self._published = None

    def error(self, reason: str) -> None:
        _capped_add(self.errors, _reason(reason), MAX_ERROR_KINDS)
        self._published = None

    def published(self) -> Quality:
        """The figures now; the same object until something changes (snapshots come at 4 Hz
        and compare equal cheaply when nothing did)."""
        if self._published is None:
            self._published = Quality(
                answers=self.answers,
                finish=tuple(self.finish.most_common()),
                lengths=tuple(self.lengths) if self.answers else (),
                latency=tuple(self.latency) if any(self.latency) else (),
                errors=tuple(self.errors.most_common(TOP_ERRORS)),
            )
        return self._published


def length_label(index: int) -> str:
    """The bucket's range, short: `<64`, `1k-2k`, `≥32k`."""

    def short(n: int) -> str:
        return f"{n // 1024}k" if n >= 1024 else str(n)

    if index == 0:
        return f"<{short(LENGTH_EDGES[0])}"
    if index >= len(LENGTH_EDGES):
        return f"≥{short(LENGTH_EDGES[-1])}"
    return f"{short(LENGTH_EDGES[index - 1])}-{short(LENGTH_EDGES[index])}"
