"""Where a budgeted run's time goes: the ramp, the steady state, and the tail.

A rate over a whole run (budget over the time from the first dispatch to the crossing)
mixes the servers' speed with costs every run pays once, whatever its server count: the
slots filling and the first answers coming back (tokens count once an answer is on disk,
and a fresh batch returns its short answers first), then the taper, where the budget
sends less so that the last answers land near it. The steady rate, tokens on disk between
30% and 80% of the budget over that time, is the servers' own; the seconds a run took
beyond the budget at that rate are the ramp's and the tail's.
"""

from __future__ import annotations

from dataclasses import dataclass

STEADY = (0.3, 0.8)
"""The share of the budget on disk where the steady state is measured, from and to."""


@dataclass(frozen=True)
class Sample:
    """One snapshot of a run: when, tokens on disk, requests the servers were running, and
    slots idle at one server while a request waited at another (both None: none said)."""

    at: float
    tokens: int
    running: float | None
    stranded: float | None = None


@dataclass(frozen=True)
class Phases:
    """A run cut at STEADY: each figure in seconds or tokens a second."""

    to_budget_s: float
    """First dispatch to the budget's crossing."""
    fill_s: float | None
    """First dispatch until every slot was running (None: never all at once)."""
    steady_rate: float
    """Tokens on disk a second between STEADY's two shares of the budget."""
    steady_full: float | None
    """The slots' mean occupancy over that stretch, 0..1 (None: no server said)."""
    ramp_s: float
    """Seconds to STEADY's first share beyond that share at the steady rate."""
    tail_s: float
    """Seconds from STEADY's second share to the crossing beyond the same at that rate."""
    stranded: float | None
    """The share of the slots idle while a request queued at another server, first
    dispatch to crossing: what a spread that ignores load costs."""


def _reach(samples: list[Sample], tokens: float) -> Sample:
    """The first sample with at least `tokens` on disk (the last one if none)."""
    return next((s for s in samples if s.tokens >= tokens), samples[-1])


def cut(samples: list[Sample], first: float, crossed: float, budget: int, slots: int) -> Phases:
    """The phases of one run from its snapshots, its first dispatch and its crossing."""
    low, high = (_reach(samples, share * budget) for share in STEADY)
    steady_rate = (high.tokens - low.tokens) / max(1e-9, high.at - low.at)
    full = next((s.at for s in samples if s.running is not None and s.running >= slots), None)
    during = [s.running for s in samples if low.at <= s.at <= high.at and s.running is not None]
    spread = [s.stranded for s in samples if first <= s.at <= crossed and s.stranded is not None]
    return Phases(
        to_budget_s=crossed - first,
        fill_s=None if full is None else full - first,
        steady_rate=steady_rate,
        steady_full=sum(min(r, slots) for r in during) / (slots * len(during)) if during else None,
        ramp_s=(low.at - first) - low.tokens / steady_rate,
        tail_s=(crossed - high.at) - (budget - high.tokens) / steady_rate,
        stranded=sum(spread) / (slots * len(spread)) if spread else None,
    )
