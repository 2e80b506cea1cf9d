"""Budget arithmetic: when a dataset may send one more request, and when it is done.

Four modes trade precision against throughput at the end of a dataset:

- ``drain`` (the seed's behaviour): dispatch while committed tokens are under the budget and
  let in-flight requests finish; overshoots by up to in-flight x mean length.
- ``predictive`` (default): precise's rule for the answers in flight (a survival estimate
  that counts those still running, so the short answers back first do not open the gate),
  with a narrower margin (PREDICTIVE_Z), and one more answer sent whenever nothing is in
  flight, so it always crosses its budget: the moment a user watches for. All it passes
  the budget by is that crossing answer's length less the room it was sent into, at most
  one mean answer: sent alone, it is cut there (budget/crossing.py, `--crossing-answer`).
- ``strict``: reserve each in-flight request's ``max_new_tokens``, so the committed total can
  never pass the budget. We reserve rather than abort in flight: aborting throws away GPU
  work already done, while a reservation only idles slots at the very end (and with several
  datasets in one pool those slots go to the next dataset).
- ``precise``: land as close to the budget as possible, from either side: predictive's rule
  with a wider margin, and the last answers sent alone only with room; it may end short of
  the budget, by less than about two mean answers (`backends/budget/precise.py`). Not the
  default: predictive always crosses its budget, which is the moment a user watches for.
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass
from enum import StrEnum

from gen_tui.backends.budget import precise
from gen_tui.backends.budget.expected import ExpectedLengths
from gen_tui.backends.budget.lengths import InFlight, LengthWindow, SurvivalModel, tokens_by


class BudgetMode(StrEnum):
    DRAIN = "drain"
    PREDICTIVE = "predictive"
    STRICT = "strict"
    PRECISE = "precise"


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


class LengthModel(LengthWindow):
    """Running picture of a dataset's completion lengths and per-request decode speed, for
    drain, predictive and strict: on top of the window, its sorted lengths with suffix sums,
    rebuilt lazily, for the expected final length of a request of a given age.
    """

    def __init__(self, prior_mean: float, lengths: list[int] | None = None) -> None:
        super().__init__(prior_mean, lengths)
        self._sorted: list[int] = []
        self._suffix: list[int] = []
        self._suffix_sq: list[int] = []
        self._dirty = True

    def observe(self, tokens: int, latency_s: float | None) -> int | None:
        evicted = super().observe(tokens, latency_s)
        self._dirty = True
        return evicted

    def _refresh(self) -> None:
        self._sorted = sorted(self._window)
        size = len(self._sorted)
        suffix = [0] * (size + 1)
        suffix_sq = [0] * (size + 1)
        for index in range(size - 1, -1, -1):
            value = self._sorted[index]
            suffix[index] = suffix[index + 1] + value
            suffix_sq[index] = suffix_sq[index + 1] + value * value
        self._suffix = suffix
        self._suffix_sq = suffix_sq
        self._dirty = False

    def outlook(self, age_s: float) -> tuple[float, float]:
        """(mean, variance) of the final length of a request in flight for `age_s` seconds."""
        if not self._window:
            return self.prior_mean, (self.prior_mean / 2) ** 2
        if self._dirty:
            self._refresh()
        index = 0
        line = self.latency_line()
        if line is not None and age_s > 0:
            done = tokens_by(line, age_s)
            if done > 0:
                index = bisect.bisect_right(self._sorted, done)
                if index == len(self._sorted):
                    return done + self.mean / 2, (self.mean / 2) ** 2
        longer = len(self._sorted) - index
        mean = self._suffix[index] / longer
        variance = max(0.0, self._suffix_sq[index] / longer - mean * mean)
        return mean, variance


Lengths = LengthModel | SurvivalModel
"""A dataset's length model: a SurvivalModel in predictive and precise modes, a LengthModel
in drain and strict (for `likely_end` and a woken dataset's room)."""

PREDICTIVE_Z = 2.5
"""Predictive's margin on precise's high estimate of what is in flight (precise keeps 3).

Why 2.5 (issue 29, `bench budget_sweep`, B2-like lengths at 150 in flight, 6 seeds): at a
10M budget 3 cost rate (0.71x drain's) and 2 ended +18.8K at p95 (of 20K allowed) where
2.5 ended +12.7K at 0.74x, above the old rule's 0.73x; at a budget of 10 pools 2 ended
+28K (2.5x the allowance) and 2.5 +12.8K.
"""


def _survival_rule(mode: BudgetMode) -> bool:
    """Whether `mode` decides by precise's rule: precise, and predictive with its crossing.

    Why predictive took precise's rule (issue 29): its own rule, the mean of the answers
    back plus a margin, counted the answers in flight at that mean, but what is in flight
    is the long ones (the short came back first), so with a budget of a few pools it
    ended 20 to 70 allowances past it; over the property test's runs
    (tests/chaos/test_fuzz_first_wave.py) its p95 was 3.1 allowances, now 1.3 to 1.5 with
    everything before the crossing answer within 0.02 of one.
    """
    return mode is BudgetMode.PRECISE or mode is BudgetMode.PREDICTIVE


def length_model(mode: BudgetMode, cap: int, lengths: list[int] | None = None) -> Lengths:
    """The length model `mode` decides by, for answers of at most `cap` tokens, seeded with
    a resumed dataset's `lengths` (its own history)."""
    if _survival_rule(mode):
        return SurvivalModel(cap, lengths)
    return LengthModel(float(cap), lengths)


def _survival(model: Lengths) -> SurvivalModel:
    if not isinstance(model, SurvivalModel):
        raise TypeError("predictive and precise modes decide by a SurvivalModel (see length_model)")
    return model


def _z(mode: BudgetMode) -> float:
    """The margin a survival-rule mode keeps on what is in flight (predictive's or precise's)."""
    return PREDICTIVE_Z if mode is BudgetMode.PREDICTIVE else precise.PRECISE_Z


TAPER_Z = 2.0
"""Standard deviations of the in-flight total kept below the budget in predictive mode.

Keeping a margin of z·σ means dispatch slows before the budget instead of stopping with a
full pool in flight, so the last stretch runs with few requests and the overshoot shrinks
from about √in-flight·σ to about one response's residual. A larger z tapers earlier, which
costs throughput on a dataset that has the server to itself.
"""


def inflight_outlook(
    inflight: list[InFlight], model: LengthModel, now: float
) -> tuple[float, float]:
    """(mean, variance) of the tokens the requests in flight will still add in all."""
    mean = variance = 0.0
    for request in inflight:
        m, v = model.outlook(request.age(now))
        mean += min(m, request.max_new_tokens)
        variance += v
    return mean, variance


def likely_end(tokens: int, inflight: list[InFlight], model: Lengths, now: float) -> int:
    """A high estimate (TAPER_Z above the mean) of the final count of a dataset that has
    sent its last prompt: what the total budget may hand on before its answers are in."""
    if isinstance(model, SurvivalModel):
        return precise.likely_end(tokens, inflight, model, now)
    mean, variance = inflight_outlook(inflight, model, now)
    cap = sum(request.max_new_tokens for request in inflight)
    return tokens + math.ceil(min(cap, mean + TAPER_Z * math.sqrt(variance)))


def may_dispatch(
    mode: BudgetMode,
    budget: Budget,
    tokens: int,
    samples: int,
    inflight: list[InFlight],
    model: Lengths,
    max_new_tokens: int,
    now: float | None = None,
    expected: ExpectedLengths | None = None,
    turns: float = 1,
) -> bool:
    """Whether one more request (with `--turns all`, one more conversation of about
    `turns` turns) may be sent for this dataset right now.

    Every mode but drain first keeps what is expected in flight within the budget
    (`expected`, see budget/expected.py): the first wave is sized by the budget, whatever
    the pool; the mode's own rule then decides within that.
    """
    if budget.max_samples is not None and samples + len(inflight) >= budget.max_samples:
        return False
    if budget.max_tokens is None:
        return True
    if tokens >= budget.max_tokens:
        return False
    if (
        expected is not None
        and mode is not BudgetMode.DRAIN
        and not expected.allows(budget.max_tokens, tokens, inflight, max_new_tokens, turns)
    ):
        return False
    if _survival_rule(mode):
        if any(request.crossing for request in inflight):
            # A cut crossing answer is out: its cap says what it adds at most, and an answer
            # sent beside it could carry the dataset past it uncut (budget/crossing.py).
            return False
        if mode is BudgetMode.PREDICTIVE and not inflight:
            return True  # predictive's promise: the budget is crossed, never stopped short
        return precise.may_dispatch(
            budget.max_tokens, tokens, inflight, _survival(model), max_new_tokens, now, _z(mode)
        )
    if mode is BudgetMode.DRAIN or not inflight:
        whole = max(1, round(turns)) * max_new_tokens  # a conversation's turns, at the cap
        return mode is not BudgetMode.STRICT or tokens + whole <= budget.max_tokens
    # A conversation's turns to come are reserved at the cap too (`--turns all`).
    reserved = sum((1 + request.turns_left) * request.max_new_tokens for request in inflight)
    return tokens + reserved + max(1, round(turns)) * max_new_tokens <= budget.max_tokens


def goes_alone(
    mode: BudgetMode,
    budget: Budget,
    tokens: int,
    model: Lengths,
    cap: int,
    now: float | None = None,
) -> bool:
    """Whether an answer sent now, none of its dataset in flight, would go alone: the
    survival rule (predictive, precise) lets none out beside it, even one just sent.

    Why it matters: that answer is the one the crossing cut is for (budget/crossing.py),
    and nothing goes beside a cut answer. Cut whenever none was in flight, a dataset whose
    answers all came back with room for many more (a fleet's priced lane at the end of its
    share, 16,000 tokens of room at a mean of 600 under a cap of 32,767) sent every answer
    after that one at a time, each cut at the room: 35 of them, 12 s of the run.
    """
    if budget.max_tokens is None or not _survival_rule(mode):
        return False
    now = time.monotonic() if now is None else now
    beside = [InFlight(now, cap)]
    limit = budget.max_tokens
    return not precise.may_dispatch(limit, tokens, beside, _survival(model), cap, now, _z(mode))


def room_for_one(
    mode: BudgetMode,
    budget: Budget,
    tokens: int,
    samples: int,
    model: Lengths,
    max_new_tokens: int,
) -> bool:
    """Whether a finished dataset whose budget grew has room for one more answer.

    Predictive and drain send one request whenever none is in flight, so a dataset woken
    for less than an answer would only overshoot: it needs room for a mean answer (before
    any answer is back, predictive's is the cap: budget/expected.py's prior; strict needs
    room for `max_new_tokens`; precise what it would send a lone answer for, `lone_room`).
    """
    if budget.reached(tokens, samples):
        return False
    remaining = budget.remaining_tokens(tokens)
    if remaining is None:
        return True
    if mode is BudgetMode.STRICT:
        return remaining >= max_new_tokens
    if mode is BudgetMode.PRECISE:
        return precise.lone_room(remaining, _survival(model))
    if isinstance(model, SurvivalModel) and not model.observed:
        return remaining >= model.cap
    return remaining >= model.mean


def eta_seconds(
    budget: Budget,
    tokens: int,
    samples: int,
    tok_s: float,
    samples_s: float,
    prompts_left: int | None = None,
    answers_per_sample: float = 1.0,
) -> float | None:
    """Seconds to the nearest limit at the current rates, or None when unknowable.

    A prompt file that runs out first is a limit too (`prompts_left` more answers).
    `samples` is what `max_samples` counts; `answers_per_sample` how many answers (the
    unit of `samples_s`) one of them takes: with `--turns all`, a conversation's turns."""
    estimates = []
    if prompts_left is not None and samples_s > 0:
        estimates.append(prompts_left / samples_s)
    if budget.max_tokens is not None and tok_s > 0:
        estimates.append(max(0, budget.max_tokens - tokens) / tok_s)
    if budget.max_samples is not None and samples_s > 0:
        left = max(0, budget.max_samples - samples) * answers_per_sample
        estimates.append(left / samples_s)
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
            name: cap
            for name in open_names
            if (cap := caps.get(name)) is not None and cap < shares[name]
        }
        if not capped:
            fixed.update({name: int(share) for name, share in shares.items()})
            break
        fixed.update(capped)
    return {name: fixed[name] for name in weights}
