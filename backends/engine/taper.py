"""The budget's taper, walked ahead for the plan's margin (backends/plan/margin.py): how many
rounds of answers a dataset's budget rule will let out one after another at its end.

Why the walk learns as it goes: the rule is cautious while few answers are back (each
answer not back counts at the cap, budget/expected.py; the survival estimate's spread is
its prior's, budget/lengths.py), and that caution lifts as the answers come back. Walked
with only what the first plan knows (two answers back), a 400k budget at the server's cap
of 32,767 let out 13 answers a round, then one at a time: 770 rounds, a margin of 62 s of
a 60 s deadline ("no lane mix meets the deadline"), and 395k of the 400k bought on the API,
where the run's own taper took 3 s. So the walk decides on copies of the dataset's length
models, each of its answers taken into them as it lands, as the run's will be.

Its answers are lengths of a lognormal law of the run's mean answer and spread (a spread
of one mean while fewer than SPREAD_MIN are back: what budget/expected.py assumes), taken
at evenly spread quantiles in a fixed order, so the same state walks the same rounds.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from gen_tui.backends.budget.crossing import CrossingAnswer, crossing_cap
from gen_tui.backends.budget.expected import SPREAD_MIN, ExpectedLengths
from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import Budget, BudgetMode, Lengths, may_dispatch

TAPER_ROUNDS_MAX = 10_000
"""A bound on the rounds walked (a budget of millions jumps its full rounds)."""

LEARN_MAX = 1_024
"""The most of a budget's full rounds the walk takes into its length models one by one (the
rest are counted whole): by then the prior weighs 4 answers in a thousand in the survival
estimate, and a budget of 90M at a mean answer of 600 would take 150,000."""

GOLDEN = (math.sqrt(5) - 1) / 2
"""The step between the walk's quantiles: any run of them is spread evenly over (0, 1)."""


class WalkLengths:
    """The walk's answer lengths: a lognormal of `mean` and coefficient of variation `cv`,
    at most `cap`, at the quantiles 0.5, 0.5 + GOLDEN, ... (mod 1)."""

    def __init__(self, mean: float, cv: float, cap: int) -> None:
        self.mean, self.deviation = mean, cv * mean
        self.sigma = math.sqrt(math.log1p(cv * cv))
        self.mu = math.log(max(1.0, mean)) - self.sigma * self.sigma / 2
        self.cap = cap
        self.index = 0
        self._normal = NormalDist()

    def take(self, limit: int) -> int:
        """The next answer's length, for a request of `max_new_tokens` `limit`."""
        share = (0.5 + self.index * GOLDEN) % 1.0
        self.index += 1
        share = min(max(share, 1e-9), 1 - 1e-9)
        length = math.exp(self.mu + self.sigma * self._normal.inv_cdf(share))
        return max(1, min(limit, self.cap, round(length)))


def walk_lengths(model: Lengths, mean: float, cap: int) -> WalkLengths:
    """The walk's law for a dataset whose `model` holds its answers back: their mean (`mean`,
    the lanes', before any is back) and, once SPREAD_MIN are back, their spread."""
    cv = 1.0
    if model.observed:
        mean = model.mean
        if model.observed >= SPREAD_MIN:
            cv = model.deviation() / max(1.0, mean)
    return WalkLengths(mean, cv, cap)


@dataclass(frozen=True)
class TaperRule:
    """What a dataset's budget rule decides by, apart from its models: the run's settings."""

    mode: BudgetMode
    crossing: CrossingAnswer
    cap: int
    """`max_new_tokens`: what an answer is asked for (cut only for the lone crossing one)."""
    width: int
    """The live lanes' requests at once: a round lets out at most this many."""
    turns: float = 1


class TaperWalk:
    """One dataset's taper, walked ahead on copies of its length models (see the module)."""

    def __init__(
        self,
        rule: TaperRule,
        budget: Budget,
        model: Lengths,
        expected: ExpectedLengths | None,
        lengths: WalkLengths,
        now: float,
    ) -> None:
        self.rule, self.budget, self.lengths, self.now = rule, budget, lengths, now
        self.model = copy.deepcopy(model)
        self.expected = copy.deepcopy(expected)
        self.learned = 0
        """Answers the walk has taken into `model` (past LEARN_MAX, `expected` alone)."""

    def rounds(self, tokens: float, samples: int) -> float:
        """The rounds the budget's taper adds past the lanes' rate, from `tokens` (on disk
        and in flight) and `samples`: one round at a time, as many requests as the rule
        lets out beside each other (`may_dispatch`, the lone crossing answer cut as the
        dispatcher cuts it), each round landing whole in the models. A round of `k`
        answers takes one answer's time where the lanes' rate gives it `k / width` of one:
        each adds its idle share, `1 - k / width` (a full round none, a lone one almost one)."""
        limit = self.budget.max_tokens
        if limit is None:
            return 0.0
        width, cap, mean = self.rule.width, self.rule.cap, self.lengths.mean
        rounds, full = 0.0, False
        for _ in range(TAPER_ROUNDS_MAX):
            room = limit - tokens
            if room > 2 * width * cap:  # full rounds, whatever the rule: not the tail's
                count = width * max(1, math.floor((room - 2 * width * cap) / (width * mean)))
                tokens += self._land([cap] * count)
                samples += count
                continue
            out = self._round(math.floor(tokens), samples, full)
            if not out:
                break
            full = len(out) == width
            rounds += 1 - len(out) / width
            tokens += self._land([entry.max_new_tokens for entry in out])
            samples += len(out)
        return rounds

    def _land(self, limits: Sequence[int]) -> float:
        """Take answers of `limits` (their `max_new_tokens`) in; their tokens. Past
        LEARN_MAX the length model has what it needs, and the rest count at the mean."""
        total = 0.0
        learn = max(0, min(len(limits), LEARN_MAX - self.learned))
        for limit in limits[:learn]:
            length = self.lengths.take(limit)
            self.model.observe(length, None)
            if self.expected is not None:
                self.expected.observe(length)
            total += length
        self.learned += learn
        rest = len(limits) - learn
        if rest:
            law = self.lengths
            total += rest * law.mean
            if self.expected is not None:
                self.expected.observe_many(rest, law.mean, law.deviation)
        return total

    def _allows(self, tokens: int, samples: int, out: list[InFlight]) -> bool:
        rule = self.rule
        return may_dispatch(
            rule.mode,
            self.budget,
            tokens,
            samples,
            out,
            self.model,
            rule.cap,
            self.now,
            expected=self.expected,
            turns=rule.turns,
        )

    def _round(self, tokens: int, samples: int, full: bool) -> list[InFlight]:
        """The requests the rule lets out at once with `tokens` on disk and none in flight:
        the first (the lone crossing answer, cut, when it goes alone under the cap), then as
        many beside it as the rule lets (by halving; after a full round, full is tried
        first: the rounds before the taper are full, one call each)."""
        rule, now = self.rule, self.now
        if not self._allows(tokens, samples, []):
            return []
        cap = rule.cap
        cut = crossing_cap(rule.crossing, rule.mode, self.budget, tokens, [], self.model, cap, now)
        out = [InFlight(now, cut, crossing=cut < cap)]
        out += [InFlight(now, cap) for _ in range(rule.width - 1)]
        if full and self._allows(tokens, samples, out[:-1]):
            return out
        low, high = 1, rule.width  # out[:low] is let out; is out[:high]?
        while low < high:
            middle = (low + high + 1) // 2
            if self._allows(tokens, samples, out[: middle - 1]):
                low = middle
            else:
                high = middle - 1
        return out[:low]
