"""Answers cut at `max_new_tokens`: counted per dataset, judged against one threshold.

Why: a truncated answer is a record like any other (finish_reason "length") and trains a
model to stop mid-thought. A few are a long tail; many mean the cap is too low for the
dataset, and the run should say so while it runs, not after 10M tokens. The engine counts
and warns (log), the snapshot and progress.json carry the count, the panel highlights it:
all through the functions here. Which record is cut (`CUT`, `record_cut`) is the watcher's
counting rule, so a resume scan, the stdlib watcher of a foreign script and the engine
judge a record alike. The share covers the whole record file: a resumed run counts the
answers it found as it counts its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from gen_tui.backends.settings import TRUNCATED_MIN_ANSWERS
from gen_tui.backends.watcher import CUT

__all__ = ["CUT", "TruncationWatch", "label", "over", "share"]
WARN_AGAIN_FACTOR = 2.0
"""A share this many times the one last warned about is warned about again."""


def share(truncated: int, answers: int) -> float | None:
    """The fraction of `answers` that were cut; None before any answer."""
    return truncated / answers if answers > 0 else None


def over(truncated: int, answers: int, warn_percent: float) -> bool:
    """Whether the share is past `warn_percent`, once there are enough answers to judge."""
    return answers >= TRUNCATED_MIN_ANSWERS and truncated * 100 > warn_percent * answers


def label(truncated: int, answers: int) -> str:
    """`12% cut`: the share for a panel; "" while none is cut."""
    fraction = share(truncated, answers)
    if not truncated or fraction is None:
        return ""
    percent = fraction * 100
    return f"{percent:.0f}% cut" if percent >= 1 else f"{percent:.1f}% cut"


@dataclass
class TruncationWatch:
    """One dataset's cut answers in its record file (those found on resume, then this run's),
    and what the log was last told."""

    truncated: int = 0
    warned_share: float | None = None

    def observe(self, finish_reason: str | None) -> None:
        if finish_reason == CUT:
            self.truncated += 1

    def warning(self, name: str, answers: int, warn_percent: float, cap: int) -> str | None:
        """The line to log now, if any: the first time the share passes the threshold, and
        again each time it doubles since (a cap that is far too low, not a long tail)."""
        if not over(self.truncated, answers, warn_percent):
            return None
        fraction = self.truncated / answers
        if self.warned_share is not None and fraction < self.warned_share * WARN_AGAIN_FACTOR:
            return None
        self.warned_share = fraction
        return (
            f"{name}: {fraction:.0%} of answers ({self.truncated} of {answers}) were cut at "
            f"max_new_tokens ({cap:,}), past the {warn_percent:g}% warning: raise "
            "--max-new-tokens (or serve a longer context)"
        )
