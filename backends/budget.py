"""Budget arithmetic: when a dataset may send one more request, and when it is done.

Three modes trade precision against throughput at the end of a dataset:

- ``drain`` (the seed's behaviour): dispatch while committed tokens are under the budget and
  let in-flight requests finish; overshoots by up to in-flight x mean length.
- ``predictive`` (default): dispatch while a high estimate (mean + TAPER_Z sigma) of the
  committed tokens plus the final lengths of the in-flight requests and the new one stays
  under the budget. Lengths come from a survival estimate over the finished answers and the
  censored in-flight ones (`lengths`), so the short answers that come back first do not
  make it low; with no history its prior sizes the first wave. The in-flight count tapers
  as the budget nears; the last answers are sent alone, each only if it very likely ends
  within a mean answer past the budget (`LONE_QUANTILE`), so the run ends within about
  one answer of the budget, on either side.
- ``strict``: reserve each in-flight request's ``max_new_tokens``, so the committed total can
  never pass the budget. We reserve rather than abort in flight: aborting throws away GPU
  work already done, while a reservation only idles slots at the very end (and with several
  datasets in one pool those slots go to the next dataset).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from enum import StrEnum

from gen_tui.backends.lengths import MIN_AT_RISK, LengthModel, Survival

__all__ = ["LengthModel"]  # kept importable from here: the budget is what it serves


class BudgetMode(StrEnum):
    DRAIN = "drain"
    PREDICTIVE = "predictive"
    STRICT = "strict"


@dataclass(slots=True)
class InFlight:
    """What the budget needs to know of one outstanding request."""

    started: float
    max_new_tokens: int
    produced: int = 0
    """Tokens it is known to have produced so far (a streaming client's count; else 0)."""


@dataclass(frozen=True, slots=True)
class Budget:
    max_tokens: int | None = None
    max_samples: int | None = None

    def reached(self, tokens: int, samples: int) -> bool:
        return (self.max_tokens is not None and tokens >= self.max_tokens) or (
            self.max_samples is not None and samples >= self.max_samples
        )

    def remaining_tokens(self, tokens: int) -> int | None:
        return None if self.max_tokens is None else max(0, self.max_tokens - tokens)


TAPER_Z = 3.0
"""Standard deviations of the in-flight total kept below the budget in predictive mode.

Keeping a margin of z·σ means dispatch slows before the budget instead of stopping with a
full pool in flight, so the last stretch runs with few requests and the overshoot shrinks
from about √in-flight·σ to about one response's residual. A larger z tapers earlier, which
costs throughput on a dataset that has the server to itself.
"""


ALLOWANCE_SHARE = 0.002
"""The share of a large budget predictive may end past it (0.2%: 20,000 tokens of 10M)."""


LONE_QUANTILE = 0.95
"""With nothing in flight, predictive sends one more answer only if it is this likely to end
within one mean answer past the budget.

The last answer cannot be truncated, so it lands past the budget by its length less the
room left, and lengths are long-tailed: sent with any room at all, it would overshoot by
more than a mean answer about one time in six. Not sent, the dataset ends short by less
than the answer would likely have overshot. A woken dataset with less room stays done.
"""


def _outlook(
    inflight: list[InFlight], model: LengthModel, now: float
) -> tuple[float, float, float, Survival]:
    """(mean, variance, shared deviation) of what the requests in flight will add in all.

    The shared deviation is the estimate's own error: the same for every request, so it
    adds up linearly (see `Survival`), where their own spreads add up as variances.
    Requests whose produced count falls in the same bin (and share a cap) share an
    outlook, so the cost is one lookup per bin, not per request: this runs on every
    dispatch.
    """
    produced = model.produced_all(
        [now - request.started for request in inflight], [request.produced for request in inflight]
    )
    law = model.survival(produced)
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


def inflight_outlook(
    inflight: list[InFlight], model: LengthModel, now: float
) -> tuple[float, float]:
    """(mean, variance) of the tokens the requests in flight will still add in all."""
    mean, variance, shared, _ = _outlook(inflight, model, now)
    return mean, variance + shared * shared


def likely_end(tokens: int, inflight: list[InFlight], model: LengthModel, now: float) -> int:
    """A high estimate (TAPER_Z above the mean) of the final count of a dataset that has
    sent its last prompt: what the total budget may hand on before its answers are in."""
    mean, variance = inflight_outlook(inflight, model, now)
    cap = sum(request.max_new_tokens for request in inflight)
    return tokens + math.ceil(min(cap, high_estimate(mean, variance)))


def allowance(budget: int, model: LengthModel) -> float:
    """How far past `budget` predictive aims to stay within (see the module docstring):
    one mean answer of those back, or ALLOWANCE_SHARE of the budget if that is more;
    nothing before any answer is back (the prior's mean is a guess, not a measure)."""
    if model.observed == 0:
        return 0.0
    return max(model.mean, ALLOWANCE_SHARE * budget)


def may_dispatch(
    mode: BudgetMode,
    budget: Budget,
    tokens: int,
    samples: int,
    inflight: list[InFlight],
    model: LengthModel,
    max_new_tokens: int,
    now: float | None = None,
) -> bool:
    """Whether one more request may be sent for this dataset right now."""
    if budget.max_samples is not None and samples + len(inflight) >= budget.max_samples:
        return False
    if budget.max_tokens is None:
        return True
    if tokens >= budget.max_tokens:
        return False
    if mode is BudgetMode.DRAIN:
        return True
    if mode is BudgetMode.STRICT:
        reserved = sum(request.max_new_tokens for request in inflight)
        return tokens + reserved + max_new_tokens <= budget.max_tokens
    if not inflight:
        # With none back yet there is nothing to go by, and the first answer is sent.
        return model.observed == 0 or lone_room(budget.max_tokens - tokens, model)
    limit = budget.max_tokens + allowance(budget.max_tokens, model)
    if tokens + (len(inflight) + 1) * max_new_tokens < limit:
        return True  # even every answer at its cap would fit
    now = time.monotonic() if now is None else now
    mean, variance, shared, law = _outlook(inflight, model, now)
    one, spread, error = law.outlook_from(0)
    mean += min(one, max_new_tokens)
    variance += model.spread(spread)
    shared += error**0.5
    return tokens + high_estimate(mean, variance + shared * shared) < limit


def high_estimate(mean: float, variance: float) -> float:
    """TAPER_Z deviations above `mean` on a lognormal of that mean and variance.

    Why not mean + TAPER_Z sigma: what a few long answers in flight add up to is skewed
    (a long one runs far past its mean more often than a normal law says), and the normal
    margin was crossed about 7% of the time where it promises 2.3% (a pool of 16 tapering
    on lognormal lengths). A lognormal matched to the same two moments (Fenton and
    Wilkinson's) keeps the skew of a few and tends to the normal margin for many.
    """
    if mean <= 0:
        return 0.0
    spread = math.log1p(variance / (mean * mean))
    return mean * math.exp(TAPER_Z * spread**0.5 - spread / 2)


def lone_room(remaining: int, model: LengthModel) -> bool:
    """Whether `remaining` tokens are room for one answer sent alone (see LONE_QUANTILE):
    it likely ends within a mean answer past the budget.

    Why a mean answer and not the allowance (0.2% of a large budget): more last answers
    alone end a 10M budget nearer it (+271 rather than -5,959 at worst in the sweep) but
    later: 0.72x drain's rate where the issue's floor is 0.73x.

    With nothing in flight every answer sent is back, so the finished lengths are an
    unbiased sample, but of fewer than two in 1 - LONE_QUANTILE (40) their quantile is
    one of the two longest: one long answer among ten asked for room for five mean
    answers, and the dataset stops for good on a no (a 60K budget ended 45K short under an
    older rule). So with so few back the quantile is at most that of an exponential law of
    their mean (the law that assumes least beyond a mean, and the prior's tail): about
    three mean answers. A dataset with prompts left ends at most about two mean answers
    short while few are back, and then by the quantile less an allowance (1.7 mean
    answers on a lognormal of cv 0.95).
    """
    high = model.mean * math.log(1.0 / (1.0 - LONE_QUANTILE))
    if model.observed >= 2 / (1.0 - LONE_QUANTILE):
        high = model.finished_quantile(LONE_QUANTILE)
    elif model.observed >= MIN_AT_RISK:
        high = min(high, model.finished_quantile(LONE_QUANTILE))
    # Before any answer is back the mean is the prior's guess: no allowance past the budget
    # on its word (as in `allowance`), so a woken dataset needs room for three of them.
    allowed = model.mean if model.observed else 0.0
    return remaining + allowed >= high


def room_for_one(
    mode: BudgetMode,
    budget: Budget,
    tokens: int,
    samples: int,
    model: LengthModel,
    max_new_tokens: int,
) -> bool:
    """Whether a finished dataset whose budget grew has room for one more answer.

    Drain sends one request whenever none is in flight, so a dataset woken for less than an
    answer would only overshoot: it needs room for a mean answer (predictive: what it would
    send a lone answer for, `lone_room`; strict: `max_new_tokens`).
    """
    if budget.reached(tokens, samples):
        return False
    remaining = budget.remaining_tokens(tokens)
    if remaining is None:
        return True
    if mode is BudgetMode.STRICT:
        return remaining >= max_new_tokens
    if mode is BudgetMode.PREDICTIVE:
        return lone_room(remaining, model)
    return remaining >= model.mean


def eta_seconds(
    budget: Budget,
    tokens: int,
    samples: int,
    tok_s: float,
    samples_s: float,
    prompts_left: int | None = None,
) -> float | None:
    """Seconds to the nearest limit at the current rates, or None when unknowable.

    A prompt file that runs out first is a limit too (`prompts_left` more answers)."""
    estimates = []
    if prompts_left is not None and samples_s > 0:
        estimates.append(prompts_left / samples_s)
    if budget.max_tokens is not None and tok_s > 0:
        estimates.append(max(0, budget.max_tokens - tokens) / tok_s)
    if budget.max_samples is not None and samples_s > 0:
        estimates.append(max(0, budget.max_samples - samples) / samples_s)
    return min(estimates) if estimates else None


def runs_out_at(
    tokens: int, max_tokens: int | None, prompts_left: int | None, mean: float | None
) -> int | None:
    """The token count at which the prompt file is likely to run out, when that comes
    before the token budget (prompts left x mean length < tokens to go); None otherwise.

    Why: a resumed budget past what the file can give used to end silently "exhausted".
    """
    if max_tokens is None or prompts_left is None or not mean or tokens >= max_tokens:
        return None
    reach = tokens + round(prompts_left * mean)
    return reach if reach < max_tokens else None


def overshoot(tokens: int, budget: int | None) -> float | None:
    """How far past `budget` a final count landed, as a fraction of it (negative: short)."""
    if not budget:
        return None
    return (tokens - budget) / budget


def share_total(
    total: int,
    weights: dict[str, float],
    caps: dict[str, int | None],
    settled: dict[str, int],
) -> dict[str, int]:
    """Split a total token budget into per-dataset budgets by weight (water-filling).

    `settled` holds the final token count of datasets that can take no more (out of
    prompts); their unused share goes to the others in proportion to their weights, and so
    does the share a dataset's own cap (`caps`) keeps it from using. The result never gives
    a dataset more than its cap, and its values add up to at most `total`.
    """
    fixed = dict(settled)
    for name, cap in caps.items():
        if cap is not None and name not in fixed and cap <= 0:
            fixed[name] = 0
    while True:
        open_names = [name for name in weights if name not in fixed]
        if not open_names:
            break
        remaining = max(0, total - sum(fixed.values()))
        weight_sum = sum(weights[name] for name in open_names) or 1.0
        shares = {name: remaining * weights[name] / weight_sum for name in open_names}
        capped = {
            name: caps[name]
            for name in open_names
            if caps.get(name) is not None and caps[name] < shares[name]  # type: ignore[operator]
        }
        if not capped:
            fixed.update({name: int(share) for name, share in shares.items()})
            break
        fixed.update(capped)  # type: ignore[arg-type]
    return {name: fixed[name] for name in weights}
