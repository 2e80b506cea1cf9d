"""What the answers in flight are expected to add, from the very first request (issue 29).

Why a rule of its own, under every mode's: before any answer is back a mode's length model
knows nothing, and the first answers back are the short ones, so a pool of 128 slots went
out whole on a 4,000-token budget (predictive ended at +154%, precise at +91%): the first
wave was sized by the pool, not by the budget. This rule sizes it by the budget.

Each answer not back yet is counted at a prior: the dataset's history (HISTORY_DOUBT times
its mean, a history may lie) or, with none, the request's own cap, an answer can never
pass it. As answers come back the estimate is the mean of every answer this run has sent,
the finished at their lengths and those still in flight at the prior (`mean`): it starts
at the prior, never trusts the short answers back first more than the long ones still
running, and ends at the run's own mean once what is in flight is small beside what is
back. The scheduler then never lets the tokens on disk plus what is in flight, at that
mean, pass the budget (`allows`); the pool, `--concurrency auto` and the datasets sharing
the pool only decide how many slots there are.
"""

from __future__ import annotations

import math

from gen_tui.backends.budget.lengths import HISTORY_DOUBT, InFlight


def history_prior(cap: int, lengths: list[int] | None) -> float:
    """The length an answer not back yet is counted at: at most `cap`; with a history,
    HISTORY_DOUBT times its mean (the budget sweep's resumes lie by 2x either way)."""
    prior = float(max(1, cap))
    if lengths:
        prior = min(prior, HISTORY_DOUBT * sum(lengths) / len(lengths))
    return max(1.0, prior)


SPREAD_MIN = 30
"""Answers back before their own spread is trusted over the prior's."""
BATCH_Z = 2.0
"""How many standard deviations of the sum of what is in batches a new batch leaves free
under the budget. A batch cannot be stopped once sent, so what it overshoots by is the
dataset's overshoot: at 2, about one wave in 40 passes the budget by the margin's worth,
and the margin shrinks with each wave (it grows with the root of the answers in flight)."""


class ExpectedLengths:
    """This run's finished answers (count and sum) against a prior for those not back."""

    def __init__(self, cap: int, lengths: list[int] | None = None) -> None:
        self.cap = max(1, cap)
        self.prior = history_prior(self.cap, lengths)
        self.finished = 0
        self.total = 0
        self.squares = 0
        """The sum of the squares of this run's answers: their spread, for a batch's margin."""

    def observe(self, tokens: int) -> None:
        """Count one answer of this run back."""
        self.finished += 1
        self.total += tokens
        self.squares += tokens * tokens

    def observe_many(self, count: int, mean: float, deviation: float) -> None:
        """Count `count` answers of this `mean` and standard `deviation` back at once (the
        plan's walk ahead, backends/engine/taper.py, over a budget's full rounds)."""
        self.finished += count
        self.total += round(count * mean)
        self.squares += round(count * (mean * mean + deviation * deviation))

    def spread(self) -> float:
        """The standard deviation of one answer: this run's, once SPREAD_MIN answers are
        back; before, the prior itself (a length's spread is about its mean, or less)."""
        if self.finished < SPREAD_MIN:
            return self.prior
        mean = self.total / self.finished
        return math.sqrt(max(0.0, self.squares / self.finished - mean * mean))

    def mean(self, inflight: int) -> float:
        """The mean answer of this run so far, with the `inflight` not back at the prior."""
        sent = self.finished + inflight
        if sent == 0:
            return self.prior
        return (self.total + inflight * self.prior) / sent

    def expected(self, inflight: list[InFlight], max_new_tokens: int, turns: float = 1) -> float:
        """What `inflight` and one more request (of `max_new_tokens`) are expected to add;
        with `--turns all` each entry's turns still to come and the `turns` of the one more
        conversation count at the mean answer too (a conversation begun is finished)."""
        mean = self.mean(len(inflight) + 1)
        more = sum(
            min(mean, float(request.max_new_tokens)) + request.turns_left * mean
            for request in inflight
        )
        return more + min(mean, float(max_new_tokens)) + max(0.0, turns - 1) * mean

    def allows(
        self,
        max_tokens: int,
        tokens: int,
        inflight: list[InFlight],
        max_new_tokens: int,
        turns: float = 1,
    ) -> bool:
        """Whether one more request (a conversation of `turns` turns) keeps the tokens on
        disk plus those expected in flight within `max_tokens`. A lone request always may:
        whether a dataset with nothing in flight sends its last answer is its mode's call
        (predictive crosses, strict and precise need room)."""
        if not inflight:
            return True
        answers = sum(1 + request.turns_left for request in inflight) + max(1.0, turns)
        if tokens + answers * max_new_tokens <= max_tokens:
            return True  # even every answer at its cap fits
        return tokens + self.expected(inflight, max_new_tokens, turns) <= max_tokens

    def answers_in(self, tokens: int) -> int:
        """About how many answers `tokens` hold, at the current mean (for the panel's note)."""
        return max(1, math.floor(tokens / self.mean(0)))


def batch_room(
    max_tokens: int,
    tokens: int,
    expected: ExpectedLengths,
    inflight: list[InFlight],
    max_new_tokens: int,
    most: int,
) -> int:
    """How many more requests (of `max_new_tokens`, up to `most`) a batch may take, so that
    the tokens on disk, what is in batches and the new ones, at the mean, plus BATCH_Z
    standard deviations of their sum, stay within `max_tokens`.

    Why the margin: a live request can be held back at the end, a batch cannot; the sum
    of n answers spreads by the root of n, so a wave sized at the mean alone would pass
    the budget half the time by that much. The next wave fills what this one leaves, and
    is smaller for it: the waves taper toward the budget. Zero when nothing more fits.
    """
    left = max_tokens - tokens
    if left <= 0 or most <= 0:
        return 0
    count = len(inflight)
    spread = expected.spread()
    reserved = sum(request.max_new_tokens for request in inflight)

    def fits(more: int) -> bool:
        if reserved + more * max_new_tokens <= left:
            return True  # every answer at its cap: no spread can pass the budget
        mean = expected.mean(count + more)
        held = sum(min(mean, float(request.max_new_tokens)) for request in inflight)
        added = more * min(mean, float(max_new_tokens))
        return held + added + BATCH_Z * spread * math.sqrt(count + more) <= left

    low, high = 0, most
    while low < high:  # the largest `more` that fits: `fits` only turns false as it grows
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
