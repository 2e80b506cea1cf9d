"""Answer lengths as a survival estimate that counts the answers still in flight (precise mode).

Why not the mean of the answers back: the first answers back are the short ones, so while
the long ones are still running that mean is low, and a budget of the order of what the
pool keeps in flight is overshot by several answers. Every answer in flight is a censored
observation instead: it is at least as long as what it has produced so far (known from a
stream, else estimated from its age). A life-table Kaplan-Meier estimate over the finished
(events) and the in-flight (censored) answers weighs both.

Why Kaplan-Meier and not a fitted long-tailed law: it assumes no shape, so a dataset whose
lengths are bimodal or capped is estimated as well as a lognormal one, and it is cheap when
binned (geometric bins, 10% wide: O(bins + in flight) per estimate, fast enough for every
dispatch). Where it has nothing to say, beyond the longest answer seen or in flight (the
frontier), the mass left is the prior: uniform between the frontier and `max_new_tokens`,
which is all that is known of an answer longer than any seen. With no history that is the
whole estimate (a mean of half `max_new_tokens`), so the first wave is sized by it; a
resumed dataset seeds the estimate with its records, its own history.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

GROWTH = 1.1
"""Each bin is this much wider than the one before (after unit-wide bins for tiny lengths)."""

MIN_AT_RISK = 10
"""Past the length where fewer answers than this are at risk, the prior's tail replaces the
estimate: the hazard of a bin with one or two answers at risk says little, and when the
longest answer back passed every one in flight, those answers' outlook fell from the
prior's to that of one or two long answers, and a burst of requests went out on it
(measured: overshoots of ten mean answers at concurrency 150)."""

PRIOR_ANSWERS = 4
"""How many answers' weight the prior's spread has against the estimate's (`spread`)."""


HISTORY_DOUBT = 4.0
"""How many times its history's mean a resumed precise dataset's prior assumes (at most
the no-history prior). The budget sweep's resumes whose history is 2x off either way then
meet its target (2 let a history of half the true mean end +104K past a one-pool top-up)."""

PRIOR_SHARE = 0.25
PRIOR_FLOOR = 512.0
"""The least answer length assumed with no history (at most the cap itself).

Why (issue 29, a real SGLang 0.5.23 server at a 128-token cap, where most answers run to
the cap): a quarter of the cap, 32, made the answers still in flight count at about 30
tokens once the first short ones were back, and a 4,000 budget ended at 4,177 to 4,401 in 5
runs of 13. No dataset we measured has a mean answer under 571 tokens, so under a cap of
2,048 the prior is the floor or the cap, whichever is less."""
"""With no history, an answer is expected to be this share of `max_new_tokens` long."""


def prior_mean(cap: int) -> float:
    """The mean answer length assumed with no history: PRIOR_SHARE of the cap, at least
    PRIOR_FLOOR (at most the cap).

    Why a share of the cap and not the cap's half (a uniform law): the cap is the server's
    context (up to 32,768) more often than the user's guess at the longest answer, and a
    prior mean of 16,384 sends a first wave of a handful of requests where the lengths
    are a few thousand. A quarter still errs long for the chat and code datasets we
    measured (means 600 to 3,793 against a 16,384 or 32,768 cap), so the first wave stays
    within the budget, and the first answers back replace it (it weighs PRIOR_ANSWERS).
    """
    return max(1.0, min(float(cap), max(cap * PRIOR_SHARE, PRIOR_FLOOR)))


def truncated_exponential(low: float, scale: float, cap: float) -> tuple[float, float]:
    """(mean, variance) of `low` plus an exponential of mean `scale`, cut off at `cap`: an
    answer that would run past the cap ends at it (finish_reason "length"), so the law's
    mass beyond the cap sits at the cap, not spread below it.

    Why it matters (issue 29, a real SGLang server at a 128-token cap where most answers
    end at the cap): spread below the cap, an answer past every one seen counted at about
    the middle of what was left to the cap, and a pool of 31 such answers was counted some
    400 tokens short: a 4,000 budget ended at 4,401."""
    width = cap - low
    if width <= 0 or scale <= 0:
        return max(low, 0.0) if width > 0 else cap, 0.0
    ratio = width / scale
    rest = math.exp(-ratio)
    first = scale * (1.0 - rest)  # E[min(X, width)] for X exponential of mean `scale`
    second = 2.0 * scale * scale * (1.0 - rest * (1.0 + ratio))  # E[min(X, width)^2]
    return low + first, max(0.0, second - first * first)


def bin_edges(cap: int) -> list[int]:
    """Lower edges of the bins covering lengths 0..cap: unit-wide, then GROWTH wider each."""
    edges = [0]
    while edges[-1] < cap:
        edges.append(max(edges[-1] + 1, math.ceil(edges[-1] * GROWTH)))
    return edges


@dataclass(frozen=True, slots=True)
class Survival:
    """The estimated law of one dataset's answer lengths at one moment.

    `upper[k]` holds (probability, Σ p·length, Σ p·length², Σ area²·noise) of the lengths
    in bins k and above, the prior's tail included, so a conditional moment is two lookups.
    The last is the estimate's own error (Greenwood's, by the delta method): few answers at
    risk past a length make the mean beyond it uncertain, and that error is shared by every
    request in flight, so the caller adds it up linearly.
    """

    edges: list[int]
    upper: list[tuple[float, float, float, float]]
    frontier: float
    cap: int
    prior: float

    def tail(self, start: float) -> tuple[float, float]:
        """(mean, variance) of an answer longer than `start` and than anything seen: the prior.

        Past the frontier the answer runs on for an exponential stretch (truncated at the
        cap) whose mean is the larger of the prior's scale (`prior_mean`, shrunk as answers
        come back) and how far it has got: an answer that has run as long as nearly all
        seen is expected to run about as long again (a heavy-tailed rule of thumb,
        pessimistic for a lognormal), and with nothing seen the answer is the prior's.
        """
        low = min(max(start, self.frontier), float(self.cap))
        return truncated_exponential(low, max(low, self.prior), float(self.cap))

    def quantile(self, share: float) -> float:
        """A length that about `share` of the answers stay under (a bin edge: on the high side)."""
        for index, (weight, *_) in enumerate(self.upper):
            if weight <= 1.0 - share:
                return float(self.edges[index])
        # In the tail: low + an exponential of mean `scale` past the frontier.
        low = min(self.frontier, float(self.cap))
        alive = self.upper[-1][0] if self.upper else 1.0
        past = alive / max(1.0 - share, 1e-9)
        if past <= 1.0:
            return low
        return min(float(self.cap), low + max(low, self.prior) * math.log(past))

    def bin_after(self, produced: float) -> int:
        """The first bin an answer that has produced `produced` may still end in: the one
        after its own (it ends above it, so this errs long by under a bin's width, 10%: the
        safe side for a budget); an answer not begun may end in any bin."""
        return bisect.bisect_right(self.edges, produced) if produced > 0 else 0

    def outlook(self, produced: float) -> tuple[float, float, float]:
        """(mean, variance, variance of the mean) of the final length of an answer that has
        produced `produced`."""
        return self.outlook_from(self.bin_after(produced))

    def outlook_from(self, index: int) -> tuple[float, float, float]:
        """`outlook` of an answer that ends in bin `index` or above (`bin_after`)."""
        start = float(self.edges[index]) if index < len(self.edges) else float(self.cap)
        if index >= len(self.upper) or self.upper[index][0] <= 1e-12 or start > self.frontier:
            mean, variance = self.tail(start)
            return mean, variance, variance
        weight, first, second, shared = self.upper[index]
        mean = first / weight
        return mean, max(0.0, second / weight - mean * mean), shared / (weight * weight)


class CensoredLengths:
    """Finished lengths in a bounded window, binned: the events of the survival estimate."""

    def __init__(self, cap: int) -> None:
        self.cap = max(1, cap)
        self.edges = bin_edges(self.cap)
        size = len(self.edges)
        self.count = [0] * size
        self.total = [0.0] * size
        self.squares = [0.0] * size
        self.events = 0

    def bin(self, length: float) -> int:
        return max(0, bisect.bisect_right(self.edges, length) - 1)

    def add(self, length: int, sign: int = 1) -> None:
        """Count one finished length (`sign` -1: forget one that left the window)."""
        index = self.bin(length)
        self.count[index] += sign
        self.total[index] += sign * length
        self.squares[index] += sign * float(length) * length
        self.events += sign

    def survival(self, produced: list[float], frontier: float, prior: float) -> Survival:
        """The life-table estimate over the finished lengths and the in-flight `produced`.

        Each bin's hazard is its events over those at risk in it, the answers censored in
        it counting half (the actuarial rule: they were at risk for about half the bin).
        Whatever survives the last bin with anything at risk is the prior's tail.
        """
        size = len(self.edges)
        censored = [0] * size
        for done in produced:
            censored[self.bin(done)] += 1
        at_risk = self.events + len(produced)
        alive = 1.0
        mass = [0.0] * size
        noise = [0.0] * size  # Greenwood's d / (n (n - d)) of each bin's hazard
        edge: float | None = None  # where the estimate stops and the prior's tail takes over
        for index in range(size):
            if at_risk <= 0:
                break
            if at_risk < MIN_AT_RISK:
                edge = self.edges[index]
                break
            events, lost = self.count[index], censored[index]
            if events:
                exposed = max(at_risk - lost / 2, events)
                hazard = min(1.0, events / exposed)
                if exposed > events:
                    noise[index] = events / (exposed * (exposed - events))
                mass[index] = alive * hazard
                alive *= 1.0 - hazard
            at_risk -= events + lost
        if edge is None:
            edge = max(frontier, max(produced, default=0.0))
        # The prior gives way to the answers back: worth PRIOR_ANSWERS of them.
        scale = prior * PRIOR_ANSWERS / (self.events + PRIOR_ANSWERS)
        estimate = Survival(self.edges, [], edge, self.cap, scale)
        tail_mean, tail_variance = estimate.tail(0.0)
        weight = alive
        first = alive * tail_mean
        second = alive * (tail_variance + tail_mean * tail_mean)
        shared = 0.0
        upper = [(0.0, 0.0, 0.0, 0.0)] * size
        for index in range(size - 1, -1, -1):
            # The area under the survival curve past this bin: what an error in its hazard
            # moves the mean by (the delta method for a Kaplan-Meier mean).
            beyond = first - weight * self.edges[min(index + 1, size - 1)]
            shared += beyond * beyond * noise[index]
            count = self.count[index]
            if count and mass[index]:
                share = mass[index] / count
                weight += mass[index]
                first += share * self.total[index]
                second += share * self.squares[index]
            upper[index] = (weight, first, second, shared)
        estimate.upper.extend(upper)
        return estimate


def tokens_by(fit: tuple[float, float], age_s: float) -> float:
    """The tokens a request out for `age_s` seconds has made by a fitted latency line
    (`LatencyLine.fitted`: fixed seconds, seconds per token): none within its fixed part."""
    fixed, per_token = fit
    return max(0.0, (age_s - fixed) / per_token)


class LatencyLine:
    """A least-squares fit of an answer's latency against its length: latency = a + b·length,
    a fixed part (queueing, prefill, client) and a per-token part. Fitting both is what lets
    a request's age tell how far it has probably got.

    A dataset keeps one over its answers (`LengthWindow`); in a fleet each lane keeps its
    own (engine/runner.py `Server.line`), whose requests it judges: lanes decode at their
    own speeds, and one line over a box at 100 tok/s and an API at 2,000 took a box request
    10 s out for 20,000 tokens into its answer, past every answer seen, so the budget
    counted each at about the cap and the box ran 1 to 4 of its 8 slots.
    """

    MIN_POINTS = 8
    """Answers before the line is trusted."""

    def __init__(self) -> None:
        self._sums = [0.0, 0.0, 0.0, 0.0, 0.0]  # n, Σlen, Σlat, Σlen², Σlen·lat

    def add(self, tokens: int, latency_s: float) -> None:
        """Take one answer of `tokens` that took `latency_s` in."""
        if latency_s <= 0:
            return
        sums = self._sums
        sums[0] += 1
        sums[1] += tokens
        sums[2] += latency_s
        sums[3] += tokens * tokens
        sums[4] += tokens * latency_s

    def fitted(self) -> tuple[float, float] | None:
        """(fixed seconds, seconds per token), or None before MIN_POINTS answers or when
        the answers say no token takes time."""
        n, sx, sy, sxx, sxy = self._sums
        if n < self.MIN_POINTS:
            return None
        spread = n * sxx - sx * sx
        if spread <= 0:
            return None
        slope = (n * sxy - sx * sy) / spread
        if slope <= 0:
            return None
        return (sy - slope * sx) / n, slope


class LengthWindow:
    """What every budget mode knows of a dataset's answer lengths: the last WINDOW finished
    lengths (a ring with its running sum, so memory is flat), how many were seen, the
    longest, and a least-squares fit of latency against length.

    Seeded by the records found on resume, so a resumed run predicts well from its first
    request. `LengthModel` (budget.py) and `SurvivalModel` build their estimates on it.
    """

    WINDOW = 4096

    def __init__(self, prior_mean: float, lengths: list[int] | None = None) -> None:
        self.prior_mean = max(1.0, prior_mean)
        self._window: list[int] = list(lengths or [])[-self.WINDOW :]
        self._next = 0
        self._count = len(self._window)
        self._sum = sum(self._window)
        self.line = LatencyLine()
        self.max_seen = max(self._window, default=0)

    def observe(self, tokens: int, latency_s: float | None) -> int | None:
        """Take a finished answer in; return the length it pushed out of the window, if any."""
        evicted = None
        if len(self._window) < self.WINDOW:
            self._window.append(tokens)
            self._sum += tokens
        else:
            evicted = self._window[self._next]
            self._sum += tokens - evicted
            self._window[self._next] = tokens
            self._next = (self._next + 1) % self.WINDOW
        self._count += 1
        self.max_seen = max(self.max_seen, tokens)
        if latency_s is not None:
            self.line.add(tokens, latency_s)
        return evicted

    @property
    def observed(self) -> int:
        return self._count

    @property
    def mean(self) -> float:
        """The mean of the finished lengths: unbiased only when none are in flight."""
        return self._sum / len(self._window) if self._window else self.prior_mean

    def known_mean(self) -> float | None:
        """The mean a person is shown: of lengths seen, never the prior's guess."""
        return self.mean if self._count else None

    def mean_low(self, z: float) -> float:
        """The mean of the finished lengths less `z` standard errors of it (at least 1): a
        mean answer the true one is very likely above. With one answer its spread is taken
        as its length (a coefficient of variation of 1, an exponential's); with none, the
        prior."""
        count = len(self._window)
        if count == 0:
            return self.prior_mean
        return max(1.0, self.mean - z * self.deviation() / math.sqrt(count))

    def deviation(self) -> float:
        """The standard deviation of the finished lengths in the window (with one, its
        length: a coefficient of variation of 1, an exponential's; with none, the prior)."""
        count = len(self._window)
        if count <= 1:
            return self.mean
        mean = self.mean
        squares = sum((length - mean) ** 2 for length in self._window)
        return math.sqrt(squares / (count - 1))

    def finished_quantile(self, share: float) -> float:
        """A length `share` of the finished answers in the window stay under (or equal)."""
        if not self._window:
            return self.prior_mean
        ordered = sorted(self._window)
        return float(ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)])

    def latency_line(self) -> tuple[float, float] | None:
        """(fixed seconds, seconds per token) of this dataset's answers (`LatencyLine`)."""
        return self.line.fitted()


class SurvivalModel(LengthWindow):
    """Running picture of a dataset's answer lengths and how fast a request produces them,
    for predictive and precise modes (`backends/budget/precise.py`); drain and strict keep
    `budget.rules.LengthModel`.

    On top of the window: the finished lengths binned for a survival estimate, and the
    fastest answers' pace. `cap` is `max_new_tokens`: no answer is longer.

    The window and the estimate hold this run's answers only. A resumed dataset's history
    (`lengths`) is kept apart (`history`): it sets the prior, HISTORY_DOUBT times its mean,
    and decides lone answers until this run's first is back. Why not in the window, as the
    other modes take it: an earlier run's answers need not be this run's (other sampling,
    another model behind the URL), and in the window they weighed as this run's own: a
    history of half the true mean sent a whole pool's first wave at a top-up of one pool's
    volume and ended +98K (26 mean answers) past it at the 95th percentile (budget sweep).
    """

    def __init__(
        self, cap: float, lengths: list[int] | None = None, prior: float | None = None
    ) -> None:
        self.cap = max(1, int(cap))
        self.history = LengthWindow(1.0, lengths)
        """A resumed dataset's earlier lengths: its lone answers' figures until this run's
        come back, and its prior (see the class)."""
        if prior is None:
            prior = prior_mean(self.cap)
            if self.history.observed:
                prior = min(prior, HISTORY_DOUBT * self.history.mean)
        super().__init__(prior)
        self.finished = CensoredLengths(self.cap)
        self._pace: list[tuple[float, int]] = []
        """(latency, length) of answers none faster was longer than: a staircase."""

    def observe(self, tokens: int, latency_s: float | None) -> int | None:
        evicted = super().observe(tokens, latency_s)
        if evicted is not None:
            self.finished.add(evicted, -1)
        self.finished.add(tokens)
        if latency_s is not None and latency_s > 0:
            self._climb(latency_s, tokens)
        return evicted

    def _climb(self, latency_s: float, tokens: int) -> None:
        pace = self._pace
        index = bisect.bisect_right(pace, (latency_s, tokens))
        if index and pace[index - 1][1] >= tokens:
            return  # as fast an answer was as long: this one says nothing new
        end = index
        while end < len(pace) and pace[end][1] <= tokens:
            end += 1
        pace[index:end] = [(latency_s, tokens)]

    def known_mean(self) -> float | None:
        return self.mean if self._count else self.history.known_mean()

    def lone_basis(self) -> LengthWindow:
        """What a lone answer is judged by: this run's lengths, or before any is back the
        history's (a resumed dataset with little room stays done on its word)."""
        return self if self._count or not self.history.observed else self.history

    def produced(self, age_s: float, known: int = 0, line: LatencyLine | None = None) -> float:
        """How many tokens a request in flight for `age_s` has produced, at least.

        `known` is the count a stream reported. Without one, the most of two estimates:
        the latency line's, and the longest answer that came back in less time than this
        request has run (answers decode at about one speed, so it has got that far). A
        request whose lane keeps its own `line` (a fleet's, `LatencyLine`) is judged by
        that line alone: the dataset's answers came at other lanes' speeds.
        """
        return self.produced_all([age_s], [known], [line])[0]

    def produced_all(
        self,
        ages: list[float],
        known: list[int],
        lines: Sequence[LatencyLine | None] | None = None,
    ) -> list[float]:
        """`produced` of many requests at once (each line fitted once, not per request)."""
        own = self.latency_line()
        fits: dict[int, tuple[float, float] | None] = {}
        pace = self._pace
        cap = float(self.cap)
        top = self.cap + 1
        result = []
        for index, (age_s, done) in enumerate(zip(ages, known, strict=True)):
            best = float(done)
            lane = lines[index] if lines is not None else None
            if lane is not None:
                if id(lane) not in fits:
                    fits[id(lane)] = lane.fitted()
                line = fits[id(lane)]
                if line is not None:
                    best = max(best, tokens_by(line, age_s))
                result.append(min(best, cap))
                continue
            if own is not None:
                best = max(best, tokens_by(own, age_s))
            if pace:
                step = bisect.bisect_right(pace, (age_s, top))
                if step:
                    best = max(best, float(pace[step - 1][1]))
            result.append(min(best, cap))
        return result

    def spread(self, variance: float) -> float:
        """`variance` (of a length, from the estimate) widened toward a prior's when few
        answers are back: from one or two short answers the estimate has a spread of about
        nothing, which would let a whole wave go out on their word. The prior (an
        exponential of `prior_mean`) counts as PRIOR_ANSWERS answers. Its spread weighs
        long on short answers (a mean of 600 against a prior of 8,192): the rate pays for
        that (BENCHMARKS.md, the budget sweep), and the first answers back, the short ones,
        cannot let a flood go out on their word (the spread of the mean seen instead was
        measured: seven times the overshoot)."""
        prior = self.prior_mean * self.prior_mean
        return (self._count * variance + PRIOR_ANSWERS * prior) / (self._count + PRIOR_ANSWERS)

    def survival(self, produced: list[float]) -> Survival:
        """The length law over the finished answers and those in flight (at `produced`)."""
        return self.finished.survival(produced, float(self.max_seen), self.prior_mean)


@dataclass(slots=True)
class InFlight:
    """What the budget needs to know of one outstanding request."""

    started: float
    max_new_tokens: int
    produced: int = 0
    """Tokens it is known to have produced so far (a streaming client's count; else 0):
    read by precise mode only, which estimates it from the request's age otherwise."""
    turns_left: int = 0
    """With `--turns all`: the turns its conversation still sends after this one, each
    counted at the mean answer by the expected rule (budget/expected.py): a conversation
    begun is finished, so the budget plans for all of it."""
    line: LatencyLine | None = None
    """Its lane's latency line, in a fleet (`LatencyLine`): what its age says of how far it
    has run (None: the dataset's answers say)."""
    expect: float = 0.0
    """The length it is expected at, where that is known better than its lane's mean: an
    answer the deadline's watch moved to a priced lane (engine/overtime.py), whose cost the
    spend cap counts at that until it lands (engine/fleet.py `committed`)."""
    crossing: bool = False
    """Sent alone with its `max_new_tokens` cut to the room left plus one mean answer
    (budget/crossing.py): the dataset's last until it is back (`rules.may_dispatch`)."""
    ages: bool = True
    """Whether its age says how far it has run: a live request's does (it decodes from when
    it is sent); a batch line's does not (it waits in the provider's queue and its answer
    comes with its batch's, hours later on a real provider): it is counted as just sent
    (`age`). Aged, a batch line three seconds out was taken for an answer past the cap, and
    the 40 lines of a fleet's batch lane held its live lanes back by about 8,000 tokens
    until they landed (bench fleet_batch: the box idle 2.7 s, 2,500 tokens left at the
    last wave's landing, the run 0.6 s late)."""

    def age(self, now: float) -> float:
        """Seconds it has run, for its length's outlook (0 for a line whose age says nothing)."""
        return now - self.started if self.ages else 0.0
