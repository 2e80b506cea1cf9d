"""`--concurrency auto`: the requests in flight, tuned to what the servers say of their load.

Why not a fixed number: the best one depends on the answers' lengths and the server's KV
cache. Too few leaves the batch short (tokens a second lost); too many long answers overfill
the KV cache, and the server retracts requests and recomputes them (tokens a second lost
again, plus latency). SGLang's /metrics say which side a run is on, every second or two:

- a retraction since the last look, or the KV cache past KV_FULL: too many. Back off to
  BACK_OFF of the target (a step back when probing near the last place it hurt, deeper
  cuts while it keeps hurting) and remember where it hurt (`ceiling`); the next look,
  which still sees requests admitted before the cut, is not counted;
- requests queued at the server beyond a few: its own batch is full, more in flight only
  waits there; settle at what it runs plus a small queue (one that hides the round trip
  between an answer and the next request, see run_config.queued_concurrency);
- otherwise grow: double at each look until the servers first push back (slow start), then
  by GROW while well under the last place it hurt, by a slot or two near it
  (a cautious probe, as TCP's congestion control does near its last loss), and forget that
  place after FORGET_S, since lengths drift.

Without metrics (an API, SGLang without --enable-metrics) the records' token rate is all
there is: climb while a step up raised it, step back when it did not (a hill climb over
windows long enough for answers to finish).

Each move of the target is told once (`on_move`: from, to, and the figure that drove it),
so a run's log says why it sent what it sent. The tuner only moves the pool's target; a
429's halving (slots.py) still applies under it, and the budget's reservations count what
is in flight whatever the target, so precision is what it is at a fixed concurrency.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gen_tui.backends.config.run import queued_concurrency
from gen_tui.backends.engine.slots import SlotPool
from gen_tui.backends.figures import counted
from gen_tui.backends.telemetry.metrics import ServerMetrics

START = 16
"""Where auto starts: low, so a server is never flooded before its metrics are read."""
MIN_TARGET = 2
KV_FULL = 0.95
BACK_OFF = 0.85
PROBE_BACK_OFF = 0.95
"""A retraction met while probing just past the last place it hurt: a step back, not a cut."""
GROW = 0.15
PROBE = 0.02
NEAR = 0.9
"""Within this share of the last place it hurt, growth turns to probing."""
FORGET_S = 60.0
QUEUE_ALLOWED = 0.1
"""Requests queued at the server past this share of what it runs (and past 4) mean full."""
CLIMB_WINDOW_S = 10.0

OnMove = Callable[[int, int, str], None]
"""(from, to, why): the target moved; `why` names the figure that moved it."""


class ConcurrencyTuner:
    """Moves `pool.concurrency` (the target) between MIN_TARGET and `ceiling_max`."""

    def __init__(
        self,
        pool: SlotPool,
        ceiling_max: int,
        start: int | None = None,
        on_move: OnMove | None = None,
    ) -> None:
        self.pool = pool
        self.on_move: OnMove | None = None
        self.ceiling_max = ceiling_max
        self.target = float(min(ceiling_max, start or START))
        self.ceiling: float | None = None
        """Where the last retraction or full KV cache happened (None: nowhere yet)."""
        self._ceiling_at = 0.0
        self._retracted: float | None = None
        self._climb: tuple[float, float, float] | None = None  # (since, tokens, target)
        self._direction = 1.0
        self._last_rate: float | None = None
        self._cuts = 0
        self._hold = False
        self._signalled = False
        """Whether the servers have pushed back yet: until then the target doubles at each
        look (TCP's slow start), so a run finds its level in seconds, not minutes."""
        self.reason = "starting"
        self._apply()
        self.on_move = on_move  # after the start, which the engine tells as such

    def limit_to(self, batches: Sequence[int | None]) -> None:
        """Honour the servers' max_running_requests (when every one says): never more in
        flight than they run plus the small queue that keeps their slots full."""
        if batches and None not in batches:
            running = sum(b for b in batches if b is not None)
            self.ceiling_max = min(self.ceiling_max, queued_concurrency(running))
            if self.target > self.ceiling_max:
                self.target = float(self.ceiling_max)
                self.reason = f"the servers run at most {running} (max_running_requests)"
            self._apply()

    def observe(
        self,
        loads: Sequence[ServerMetrics | None],
        tokens: int,
        now: float,
        budget_room: int | None = None,
    ) -> None:
        """One look at the servers (their latest /metrics) and the run's tokens on disk.

        `budget_room`: about how many answers the budgets still have room for (None: some
        dataset has no token budget). The target never climbs past it: a 4,000-token budget
        of about 31 answers has no use for 128 slots, and doubling into them before any
        answer is back is how a small budget was overshot (issue 29).
        """
        known = [load for load in loads if load is not None and load.running is not None]
        if known and len(known) == len(loads):
            self._by_metrics(known, now)
        else:
            self._by_rate(tokens, now)
        if budget_room is not None and self.target > max(MIN_TARGET, budget_room):
            self.target = float(max(MIN_TARGET, budget_room))
            self.reason = f"the budgets have room for about {counted(budget_room, 'answer')}"
        self._apply()

    def _by_metrics(self, loads: list[ServerMetrics], now: float) -> None:
        retracted_now = [load.retracted for load in loads]
        retracted = sum(r for r in retracted_now if r is not None)
        first = self._retracted is None  # no baseline for the retraction count yet
        before = self._retracted or 0
        more = not first and retracted > before
        self._retracted = retracted
        kv = max((load.kv_usage for load in loads if load.kv_usage is not None), default=0.0)
        running = sum(load.running or 0 for load in loads)
        queued = sum(load.queued or 0 for load in loads)
        if self.ceiling is not None and now - self._ceiling_at > FORGET_S:
            self.ceiling = None
        if self._hold and kv < KV_FULL:
            # The look after a cut still sees requests admitted before it: not new evidence.
            self._hold = False
            return
        if more or kv >= KV_FULL:
            probing = self.ceiling is not None and self.target >= NEAR * self.ceiling
            self._cuts += 1  # pushed back again after a cut took effect: far over, cut deeper
            factor = PROBE_BACK_OFF if probing and self._cuts == 1 else BACK_OFF**self._cuts
            self.ceiling = self.target
            self._ceiling_at = now
            self.target = max(MIN_TARGET, self.target * factor)
            self.reason = (
                f"{retracted - before:.0f} retractions since the last look, KV {kv:.0%}"
                if more
                else f"KV cache {kv:.0%} full"
            )
            self._signalled = True
            self._hold = True
            return
        self._cuts = 0
        if queued > max(4.0, QUEUE_ALLOWED * running):
            self.target = max(MIN_TARGET, min(self.target, queued_concurrency(int(running))))
            self.reason = f"{queued:.0f} queued at the server, {running:.0f} running"
            self._signalled = True
        elif first:
            self.reason = "reading the servers"
        elif len(self.pool) >= 0.9 * int(self.target):
            if not self._signalled:
                self.target = min(float(self.ceiling_max), self.target * 2)
                self.reason = f"starting: doubling (KV {kv:.0%}, {queued:.0f} queued)"
            else:
                near = self.ceiling is not None and self.target >= NEAR * self.ceiling
                step = PROBE if near else GROW
                grown = self.target * (1 + step) + 1
                if self.ceiling is not None and not near:
                    grown = min(grown, NEAR * self.ceiling)  # fast to near it, then probe
                self.target = min(float(self.ceiling_max), grown)
                room = f"KV {kv:.0%}, {queued:.0f} queued"
                self.reason = (
                    f"probing (it last hurt at {self.ceiling:.0f}; {room})"
                    if near
                    else f"growing ({room})"
                )

    def _by_rate(self, tokens: int, now: float) -> None:
        """Hill climb on the records' token rate, one step per CLIMB_WINDOW_S."""
        if self._climb is None:
            self._climb = (now, float(tokens), self.target)
            return
        since, before, _ = self._climb
        if now - since < CLIMB_WINDOW_S:
            return
        rate = (tokens - before) / (now - since)
        last = self._last_rate
        paid = last is None or rate >= last * 1.02
        if not paid:
            self._direction = -self._direction  # that step did not pay: go back
        self._last_rate = rate
        step = max(1.0, self.target * GROW)
        self.target = min(
            float(self.ceiling_max), max(MIN_TARGET, self.target + step * self._direction)
        )
        self._climb = (now, float(tokens), self.target)
        said = f"{rate:.0f} tok/s" + ("" if last is None else f" after {last:.0f}")
        way = "up" if self._direction > 0 else "down"
        self.reason = f"no server metrics: token rate {said}, stepping {way}"
        if not paid:
            self.reason += " (that step did not pay)"

    def _apply(self) -> None:
        """The pool's cap follows the target; a 429's lower limit stays below it."""
        target = max(MIN_TARGET, int(self.target))
        before = self.pool.concurrency
        grew = target - before
        self.pool.concurrency = target
        self.pool.limit = min(float(target), self.pool.limit + max(0, grew))
        if grew and self.on_move is not None:
            self.on_move(before, target, self.reason)
