"""The crossing answer: how long the last answer a dataset sends alone may run.

Why (issue 29): predictive, the default, always crosses its budget, and at budgets of a
few pools or less its crossing answer goes out alone, nothing else of the dataset in
flight (236 of 240 sweep runs, BENCHMARKS.md). An answer sent alone lands its length less
the room left, and lengths are long-tailed: 2.6 to 2.9 mean answers past the budget at p95
whatever the room (`bench budget_sweep`'s `lone_excess`), where the issue's bound is one
mean answer. No rule that must cross meets it while that answer runs whole; so that one
request is sent with `max_new_tokens` of the room left plus one mean answer (at most the
cap): the dataset still crosses its budget, by at most a mean answer. If the answer ends
short of the room, the next goes with the new room, as before.

Only that request is cut: one sent with others of the dataset in flight keeps the cap (what
the others add is not known yet), and so does one sent with none in flight while the room
holds many answers (`rules.goes_alone`: the rule lets others out beside it, so it is not
the last; cut, nothing went beside it and every answer after it went alone, each cut), so
the cut is at most one answer per dataset per run, whose record says finish_reason "length"
like any answer that met its cap. `whole` (`--crossing-answer whole`) sends it whole, for a
user who never wants an answer shortened; strict never needs it (it reserves every cap) and
drain is the seed's behaviour.
"""

from __future__ import annotations

import math
from enum import StrEnum

from gen_tui.backends.budget.lengths import InFlight, LengthWindow, SurvivalModel
from gen_tui.backends.budget.rules import Budget, BudgetMode, Lengths, goes_alone


class CrossingAnswer(StrEnum):
    CUT = "cut"
    WHOLE = "whole"


DEFAULT_CROSSING_ANSWER = CrossingAnswer.CUT
"""Cut: the default meets issue 29's bound at every budget / in-flight ratio (BENCHMARKS.md)."""

CUTTING_MODES = (BudgetMode.PREDICTIVE, BudgetMode.PRECISE)
"""The modes whose last answer may cross the budget alone: strict never crosses, drain is
the seed's behaviour."""


def crossing_cap(
    policy: CrossingAnswer,
    mode: BudgetMode,
    budget: Budget,
    tokens: int,
    inflight: list[InFlight],
    model: Lengths,
    cap: int,
    now: float | None = None,
) -> int:
    """The `max_new_tokens` of a request about to be sent with the `inflight` of its dataset
    out (not counting itself) and `tokens` on disk: `cap`, unless it is the lone crossing
    answer (none in flight, and the rule lets none beside it: `goes_alone`), which could
    carry the dataset past the budget plus one mean answer (`one_mean_answer`); then the
    room left plus that mean answer."""
    if policy is not CrossingAnswer.CUT or mode not in CUTTING_MODES or inflight:
        return cap
    if budget.max_tokens is None:
        return cap
    room = budget.max_tokens - tokens
    if room <= 0:
        return cap  # not sent: the budget is reached
    if room >= cap or not goes_alone(mode, budget, tokens, model, cap, now):
        return cap  # not the last: others go beside it, as beside any answer in flight
    cut = room + math.floor(one_mean_answer(model))  # whole tokens, never past it
    return min(cap, cut)


MEAN_Z = 2.0
"""Standard errors of the mean answer the cut keeps below it (`one_mean_answer`).

Why not the mean itself: the bound is a mean answer of the lengths, not of the few this
run has back, and at a budget of a few pools that sample mean is off by a fifth at p95 (it
holds 8 to 160 answers, cv 0.95): cut at it, the sweep's p95 ended 3,689 to 4,599 past the
budget where the mean is 3,793 (BENCHMARKS.md). Two standard errors below it, the true
mean is very likely above the cut's excess.
"""


def one_mean_answer(model: LengthWindow) -> float:
    """The excess the lone crossing answer is allowed: the mean of this run's answers back
    (else a resumed history's; else the prior), less MEAN_Z standard errors."""
    basis = model.lone_basis() if isinstance(model, SurvivalModel) else model
    return basis.mean_low(MEAN_Z)
