"""Precise budget mode: land as close to the budget as possible, from either side.

Why a mode of its own and not predictive's rule: to end near a budget that is small against
what the pool keeps in flight, a dataset must stop sending before it crosses, and the last
answer cannot be cut, so a precise dataset may end short of its budget (by less than
`LONE_QUANTILE`'s room, about two mean answers at most) rather than cross it by several.
Predictive, the default, always crosses: the crossing is what a user watches for.

The rule: dispatch while a high estimate (lognormal, `PRECISE_Z` deviations) of the
committed tokens plus the final lengths of the answers in flight and the new one stays
within the budget plus an allowance (`allowance`). Lengths come from a survival estimate
over the finished answers and the censored in-flight ones (`backends/budget/lengths.py`), so the
short answers that come back first do not make it low; with no history its prior sizes the
first wave. The last answers are sent alone, each only if it very likely ends within a mean
answer past the budget (`lone_room`); a dataset that has no room for one more is done.
"""

from __future__ import annotations

import math
import time

from gen_tui.backends.budget.lengths import MIN_AT_RISK, InFlight, Survival, SurvivalModel

PRECISE_Z = 3.0
"""Deviations of the in-flight total (on a lognormal, `high_estimate`) kept under the limit.

Higher than predictive's TAPER_Z: a precise dataset may end short rather than cross, so it
can afford to taper early; 3 keeps a wave's overshoot rare where 2 let one in ten through.
"""

ALLOWANCE_SHARE = 0.002
"""The share of a large budget a precise dataset may end past it (0.2%: 20,000 of 10M)."""

LONE_QUANTILE = 0.95
"""With nothing in flight, a precise dataset sends one more answer only if it is this likely
to end within one mean answer past the budget.

The last answer cannot be truncated, so it lands past the budget by its length less the
room left, and lengths are long-tailed: sent with any room at all, it would overshoot by
more than a mean answer about one time in six. Not sent, the dataset ends short by less
than the answer would likely have overshot. A woken dataset with less room stays done.
(With `--crossing-answer cut`, the default, a lone answer sent is cut at the room plus one
mean answer, budget/crossing.py: the one in six then ends exactly a mean answer past.)
"""


def read_inflight(
    inflight: list[InFlight], model: SurvivalModel, now: float
) -> tuple[list[float], Survival]:
    """How far each request in flight has got (its stream's count, else its age by its
    lane's or the dataset's latency line) and the length law over the answers back and
    those: what the budget's rule reads, and what the deadline's watch reads of the same
    requests (engine/overtime.py)."""
    produced = model.produced_all(
        [request.age(now) for request in inflight],
        [request.produced for request in inflight],
        [request.line for request in inflight],
    )
    return produced, model.survival(produced)


def _outlook(
    inflight: list[InFlight], model: SurvivalModel, now: float
) -> tuple[float, float, float, Survival]:
    """(mean, variance, shared deviation) of what the requests in flight will add in all.

    The shared deviation is the estimate's own error: the same for every request, so it
    adds up linearly (see `Survival`), where their own spreads add up as variances.
    Requests whose produced count falls in the same bin (and share a cap) share an
    outlook, so the cost is one lookup per bin, not per request: this runs on every
    dispatch.
    """
    produced, law = read_inflight(inflight, model, now)
    groups: dict[tuple[int, int], int] = {}
    for request, done in zip(inflight, produced, strict=True):
        key = law.bin_after(done), request.max_new_tokens
        groups[key] = groups.get(key, 0) + 1
    mean = variance = shared = 0.0
    for (index, cap), count in groups.items():
        m, v, error = law.outlook_from(index)
        mean += count * min(m, cap)
        variance += count * model.spread(v)
        shared += count * error**0.5
    return mean, variance, shared, law


def likely_end(tokens: int, inflight: list[InFlight], model: SurvivalModel, now: float) -> int:
    """A high estimate of the final count of a dataset that has sent its last prompt: what
    the total budget may hand on before its answers are in."""
    mean, variance, shared, _ = _outlook(inflight, model, now)
    cap = sum(request.max_new_tokens for request in inflight)
    return tokens + math.ceil(min(cap, high_estimate(mean, variance + shared * shared)))


def allowance(budget: int, model: SurvivalModel) -> float:
    """How far past `budget` a precise dataset aims to stay within: one mean answer of those
    back, or ALLOWANCE_SHARE of the budget if that is more; nothing before any answer is
    back (the prior's mean is a guess, not a measure)."""
    if model.observed == 0:
        return 0.0
    return max(model.mean, ALLOWANCE_SHARE * budget)


def may_dispatch(
    max_tokens: int,
    tokens: int,
    inflight: list[InFlight],
    model: SurvivalModel,
    max_new_tokens: int,
    now: float | None = None,
    z: float = PRECISE_Z,
) -> bool:
    """Whether one more request may go out under a token budget not yet reached, keeping
    `z` deviations (PRECISE_Z; predictive keeps its own, `rules.PREDICTIVE_Z`) of what is in
    flight under the limit."""
    if not inflight:
        # With none back yet and no history there is nothing to go by: the first is sent.
        return model.lone_basis().observed == 0 or lone_room(max_tokens - tokens, model)
    limit = max_tokens + allowance(max_tokens, model)
    if tokens + (len(inflight) + 1) * max_new_tokens < limit:
        return True  # even every answer at its cap would fit
    now = time.monotonic() if now is None else now
    mean, variance, shared, law = _outlook(inflight, model, now)
    one, spread, error = law.outlook_from(0)
    mean += min(one, max_new_tokens)
    variance += model.spread(spread)
    shared += error**0.5
    return tokens + high_estimate(mean, variance + shared * shared, z) < limit


def high_estimate(mean: float, variance: float, z: float = PRECISE_Z) -> float:
    """`z` deviations above `mean` on a lognormal of that mean and variance.

    Why not mean + z sigma: what a few long answers in flight add up to is skewed (a long
    one runs far past its mean more often than a normal law says), and the normal margin
    was crossed about 7% of the time where it promises 2.3% (a pool of 16 tapering on
    lognormal lengths). A lognormal matched to the same two moments (Fenton and
    Wilkinson's) keeps the skew of a few and tends to the normal margin for many.
    """
    if mean <= 0:
        return 0.0
    spread = math.log1p(variance / (mean * mean))
    return mean * math.exp(z * spread**0.5 - spread / 2)


def lone_room(remaining: int, model: SurvivalModel) -> bool:
    """Whether `remaining` tokens are room for one answer sent alone (see LONE_QUANTILE):
    it likely ends within a mean answer past the budget. Also what a finished precise
    dataset whose budget grew needs to wake (`budget.room_for_one`).

    Why a mean answer and not the allowance (0.2% of a large budget): more last answers
    alone end a 10M budget nearer it (+271 rather than -5,959 at worst in the sweep) but
    later: 0.72x drain's rate where the issue's floor is 0.73x.

    With nothing in flight every answer sent is back, so the finished lengths are an
    unbiased sample, but of fewer than two in 1 - LONE_QUANTILE (40) their quantile is
    one of the two longest: one long answer among ten asked for room for five mean
    answers, and the dataset stops for good on a no (a 60K budget ended 45K short under an
    older rule). So with so few back the quantile is at most that of an exponential law of
    their mean (the law that assumes least beyond a mean, and the prior's tail): about
    three mean answers. A dataset with prompts left thus ends at most about two mean
    answers short while few are back, and then by the quantile less one mean answer (1.7
    mean answers on a lognormal of cv 0.95).
    """
    basis = model.lone_basis()
    high = basis.mean * math.log(1.0 / (1.0 - LONE_QUANTILE))
    if basis.observed >= 2 / (1.0 - LONE_QUANTILE):
        high = basis.finished_quantile(LONE_QUANTILE)
    elif basis.observed >= MIN_AT_RISK:
        high = min(high, basis.finished_quantile(LONE_QUANTILE))
    # Before any answer is back the mean is the prior's guess: no allowance past the budget
    # on its word (as in `allowance`), so a woken dataset needs room for three of them.
    allowed = basis.mean if basis.observed else 0.0
    return remaining + allowed >= high
