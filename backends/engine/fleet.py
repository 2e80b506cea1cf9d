"""The engine's side of the fleet planner: measure each lane, plan, hand each lane its share.

Every `plan_every` seconds, more often as the deadline nears (`interval`), and once as soon
as every lane has answered, it measures each lane (its rate per request times its
concurrency, its dollars per completion token), asks `backends.plan` for the least-cost
split of the tokens left by the deadline within what is left of `--max-cost`, and caps each
priced lane at its planned tokens (free lanes are never capped: the plan fills them
first). A plan that moves tokens is said in one line (`api lane down: 12M moved to batch`);
one that cannot meet the deadline, or that the cap cannot pay, is said at once.

The deadline and the cap can change while the run goes: the hosted engine's panel passes a
new target in (`retarget`), a headless run's panel writes the control file into one of its
dataset folders (backends/plan/control.py), looked for every CONTROL_POLL_S; either way the
plan is redone at once. The current plan is published as a `PlanView` (progress.json's
`plan`, the panel's plan line).

A batch lane (`api=openai-batch`) is planned from its observed turnaround and price
(`BatchLane.planned`); its share is handed over whole, not paced (a batch delivers only
after its turnaround, so what it is to take by the deadline must go out now).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence

from gen_tui.backends.aio import within
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.engine.batch_lane import BatchLane
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.runner import RequestRunner, Server
from gen_tui.backends.engine.taper import TaperRule, TaperWalk, walk_lengths
from gen_tui.backends.figures import format_duration
from gen_tui.backends.plan import (
    Lane,
    LaneState,
    Plan,
    PlanStatus,
    RequestTimes,
    explain,
    finish_margin,
    parse_deadline,
    plan,
)
from gen_tui.backends.plan.control import (
    CONTROL_FILE,
    CONTROL_POLL_S,
    ControlError,
    PlanTarget,
    read_target,
)
from gen_tui.backends.plan.margin import MARGIN_Z
from gen_tui.backends.progress.plan_view import LanePlan, PlanView, wall_time
from gen_tui.backends.store.conversations import Turns

FIRST_PLAN_ANSWERS = 1
"""Answers each lane gives before the first plan: its rate is unknown until then (a priced
lane sends one request meanwhile, `PROBE_REQUESTS`; a free one runs)."""
SETTLED_ANSWERS = 3
"""A free lane's rate is its delivered tokens over its time once it has this many answers and
has run this many times as long as its first answer took (before, a first answer or two say
little of its pace)."""
CHECK_S = 0.5
"""How often the first plan looks whether every lane has answered."""
PLAN_SHARE = 10
"""Nearer the deadline than `plan_every` times this, the plan is redone every this-th of the
time left (`FleetPlanner.interval`). Why: a plan is as good as the rates it last measured,
and a minute is nothing of a night but all of a 2-minute deadline; the default of 60 s
re-planned a 60 s run once, from its first answers, where every later plan corrects the
box's early rate and the margin as the taper's answers come in."""
PLAN_MIN_S = 5.0
"""The shortest interval between re-plans the deadline brings (`--plan-every` may set a
shorter one): each plan walks every dataset's taper (15 to 36 ms a dataset at a cap of
32,767) on the engine's loop."""
TREND_WINDOW_S = 300.0
"""A lane's trend is the slope of its measured rates over the last this many seconds."""
TREND_MIN_SPAN_S = 120.0
"""Rates spread over less than this say nothing of a trend (a box's first minutes settle)."""


def request_times(server: Server) -> RequestTimes | None:
    """`server`'s measured request times (None: no answer yet)."""
    if not server.answers:
        return None
    mean = server.request_s / server.answers
    variance = max(0.0, server.request_s2 / server.answers - mean * mean)
    return RequestTimes(mean, variance**0.5)


def rate_trend(
    samples: Sequence[tuple[float, float]],
    now: float,
    window_s: float = TREND_WINDOW_S,
    min_span_s: float = TREND_MIN_SPAN_S,
) -> float:
    """The least-squares slope (tok/s per second) of the (time, rate) `samples` within
    `window_s` before `now`; 0 when they span less than `min_span_s` (or are fewer than
    three): a lane slowing as its answers lengthen is planned to go on slowing."""
    recent = [(t, rate) for t, rate in samples if now - t <= window_s]
    if len(recent) < 3 or recent[-1][0] - recent[0][0] < min_span_s:
        return 0.0
    mean_t = sum(t for t, _ in recent) / len(recent)
    mean_r = sum(rate for _, rate in recent) / len(recent)
    spread = sum((t - mean_t) ** 2 for t, _ in recent)
    if spread <= 0:
        return 0.0
    return sum((t - mean_t) * (rate - mean_r) for t, rate in recent) / spread


def soonest(
    servers: Sequence[Server],
    chosen: Server,
    tokens: float,
    room: float,
    price: Callable[[Server], float],
    beat_s: float | None = None,
) -> Server:
    """The server that delivers an answer of up to `tokens` soonest, of `chosen` and those
    with a free slot whose price for it stays within `room` dollars (free ones always
    do); `chosen` when none is faster or its speed is not known yet. `beat_s`: the time
    `chosen` would take (an answer already running there: its time to go), by default a
    whole answer's there."""
    best, best_s = chosen, chosen.expected_s(tokens) if beat_s is None else beat_s
    for server in servers:
        if server is chosen or not server.has_slot():
            continue
        if price(server) * tokens > room:
            continue
        expected = server.expected_s(tokens)
        if expected is not None and (best_s is None or expected < best_s):
            best, best_s = server, expected
    return best


class FleetPlanner(RunPart):
    """Re-plans the lanes' shares from their measured rates while the run goes."""

    def __init__(self, run: RunContext, runner: RequestRunner, cost: CostMeter) -> None:
        super().__init__(run)
        self.runner = runner
        self.cost = cost
        self.lanes = {lane.url: lane for lane in self.config.fleet}
        self.started = time.monotonic()
        self.deadline_at: float | None = None
        if self.config.deadline is not None:
            self.deadline_at = self.started + parse_deadline(self.config.deadline)
        self.current: Plan | None = None
        self.view: PlanView | None = None
        """The current plan as progress.json and the panel carry it (None: none yet)."""
        self._started_wall = time.time()
        """A control file older than this is an earlier run's."""
        self._seen: dict[str, tuple[int, int]] = {}
        """Each control file's time and size when last read: one read per change."""
        self._changed: str | None = None
        """Why the next re-plan differs, when the target changed (for its log line)."""
        self.history: list[str] = []
        """Every plan line said, in order (tests and the run's end read it)."""
        self.stalled = asyncio.Event()
        """Set by the runner when no lane has room left under the plan: re-plan at once."""
        runner.on_stall = self.stalled.set
        self.batch: BatchLane | None = None
        """The fleet's batch lane, planned beside the live servers (set by the engine)."""
        self._routed: set[tuple[bool, str, str]] = set()
        """The reroutes said once (lone or not, from, to): a deadline's last seconds may
        hurry many requests."""
        self.rates: dict[str, list[tuple[float, float]]] = {}
        """Each live lane's measured rates, (when, tok/s), over the last TREND_WINDOW_S."""
        self.margin_s = 0.0
        """The time the last plan kept before the deadline for the run's tail
        (backends/plan/margin.py); a request sent within it goes to the soonest lane."""

    def lane_name(self, server: Server) -> str:
        """Its lane's name, as the plan's lines say it (its URL when it is no lane)."""
        lane = self.lanes.get(server.url)
        return lane.name if lane is not None else server.url

    def price(self, server: Server) -> float:
        """Its dollars per completion token: as measured, else as its lane says."""
        spec = self.lanes.get(server.url)
        if server.tokens > 0 and server.cost > 0:
            price = server.cost / server.tokens
        else:
            price = spec.price_per_token if spec is not None else 0.0
        if spec is None and self.config.price_per_million is not None:
            price = self.config.price_per_million[1] / 1e6
        return price

    @property
    def max_cost(self) -> float | None:
        """The spend cap now (`--max-cost`, or as a control file or the panel changed it):
        the cost meter's, which ends a run with no free lane when it is spent."""
        return self.cost.max_cost

    @max_cost.setter
    def max_cost(self, value: float | None) -> None:
        self.cost.max_cost = value

    def has_free_lane(self) -> bool:
        """Whether a lane costs nothing (the box): the run goes on there once the cap is
        spent, as the plan says (`meeting the deadline costs $78.00, over the $60.00 cap:
        the best finish is 4h30m late`), and the cap stops the priced lanes alone."""
        return any(self.price(server) == 0 for server in self.runner.servers)

    def cap_reserve(self) -> float:
        """Dollars the plan keeps in hand under the cap: for each priced lane, one mean
        answer (it sends while its share has any room left) and MARGIN_Z deviations of
        the sum of a full width of answers past their mean (in flight as the cap runs out,
        each is counted at its lane's mean). A $0.02 cap spent to $0.02001-$0.02045 in
        three runs with neither, to $0.0197 with the first alone."""
        reserve = 0.0
        for server in self.runner.servers:
            price = self.price(server)
            if price > 0:
                width = server.limit or self.config.max_concurrency
                spread = MARGIN_Z * math.sqrt(width) * server.answer_spread
                reserve += price * (server.mean_answer + spread)
        return reserve

    def room(self) -> float:
        """Dollars the cap still allows beyond what is spent and in flight, and the plan's
        reserve (`cap_reserve`), for the plan and for what the route and the watch send
        outside its shares (inf: no cap)."""
        if self.max_cost is None:
            return math.inf
        return self.max_cost - self.committed() - self.cap_reserve()

    def committed(self) -> float:
        """Dollars spent, and expected for the answers in flight: each at its lane's mean
        answer, or what it has streamed, or what it was expected at when the deadline's
        watch moved it there (`InFlight.expect`). At the lane's mean alone, answers the
        watch moved from the box (about 3,900 tokens where the API's mean was 200) passed
        a $0.02 cap by 35%."""
        flying = 0.0
        for server in self.runner.servers:
            price = self.price(server)
            if price <= 0:
                continue
            mean = server.mean_answer
            known = [max(mean, e.expect, e.produced) for e in server.flying.values()]
            waiting = max(0, server.outstanding - len(known))  # slots taken, not yet sent
            flying += price * (sum(known) + waiting * mean)
        batch = self.batch
        if batch is not None and batch.spec is not None:
            flying += batch.outstanding() * batch.planned(time.monotonic()).price
        return self.cost.total() + flying

    def route(self, server: Server, tokens: int, lone: bool, likely: float | None = None) -> Server:
        """Where a request the dispatcher took a slot on `server` for goes, its answer of up
        to `tokens`: `server`, unless the plan has a deadline and either the request is
        its dataset's last, sent alone (`lone`) while the plan buys tokens to meet the
        deadline or lands past it on `server`, or less time is left to the deadline than
        a request takes on `server`. Then the lane that delivers it soonest, whose price
        for it stays under the cap (`soonest`): the slow free box must not hold the run's
        last answer past the deadline (the rehearsal saw it land 0.37 s late).

        `likely`: the answer's likely length (its dataset's mean answer), what its time on
        each lane is weighed and said by; `tokens`, its cap, bounds its price. Why not the
        cap for its time: at a server's context (32,767) a last answer of 300 tokens read
        as 27 minutes on a box at 20 tok/s, so every one in the night's last half hour was
        bought, and the log said `api (164.2 s), not box (1636.5 s)` of a 1.5 s answer. One
        that does run long on the box is the deadline's watch's to move (overtime.py)."""
        made = self.current
        if self.deadline_at is None or made is None or made.status is PlanStatus.STALLED:
            return server
        left = self.deadline_at - time.monotonic()
        length = tokens if likely is None else min(float(tokens), likely)
        if lone:
            late = server.expected_s(length)
            hurry = made.cost > 0 or (late is not None and left < late)
        else:
            # An answer landing within the plan's margin is the tail's: the budget's taper
            # waits on it (its rule holds back what the answers in flight may add), and the
            # taper's rounds come after it, planned at the soonest lane's answers. A request
            # that lands there goes to the soonest lane, not the slow box (one sent 2.1 s
            # before the deadline landed 1.1 s before it, and the four rounds after it,
            # 0.25 to 0.33 s each on the API, ended the run 0.12 s late).
            mean = server.expected_s() or 0.0
            hurry = left < self.margin_s + mean
        if not hurry:
            return server
        best = soonest(self.runner.servers, server, tokens, self.room(), self.price)
        if best is server:
            return server
        self.runner.move(server, best)
        what = "its last answer, sent alone," if lone else "a request"
        key = (lone, self.lane_name(server), self.lane_name(best))
        if key not in self._routed:
            self._routed.add(key)
            took, takes = server.expected_s(length), best.expected_s(length)
            to_go = max(0.0, left)
            said = f"{to_go:.1f} s" if to_go < 60 else format_duration(to_go)
            self.reporter.event(
                "info",
                f"{said} to the deadline: {what} goes to "
                f"{self.lane_name(best)} ({takes or 0:.1f} s), not {self.lane_name(server)} "
                f"({took or 0:.1f} s)",
            )
        return best

    def measured(self) -> list[Lane]:
        """Each server as the planner sees it now."""
        now = time.monotonic()
        lanes = []
        for server in self.runner.servers:
            price = self.price(server)
            latency = server.request_s / server.answers if server.answers else 0.0
            running_s = now - server.first_sent if server.first_sent is not None else 0.0
            fill = latency
            if server.first_answered is not None and server.first_sent is not None:
                fill = server.first_answered - server.first_sent
            settled = server.answers >= SETTLED_ANSWERS and running_s > SETTLED_ANSWERS * fill > 0
            flying = server.made_in_flight(now)
            if price == 0 and settled and flying is not None:
                # A free lane is never held back: what it made since its first request is
                # its rate (round trips and idle slots included, unlike per request): its
                # answers and what its requests in flight have made (`made_in_flight`:
                # streamed, or read from their age). Its answers alone lag its work by the
                # requests in flight, and by more than the first answer's time when lengths
                # have a long tail (the short answers land first): a box of 8 slots at 50
                # tok/s each, answers of a mean of 300 with a cv of 0.95, was planned at 94
                # tok/s 6 s in, and sat idle; one of 8 at 100 tok/s (mean 600) at 245 tok/s
                # 6 s in from a client that does not stream, where it made about 770.
                rate = (server.tokens + flying) / running_s
            elif price == 0 and settled:
                # No latency line yet: what it delivered, less the pipe's filling: until
                # its first answer, not its mean request time, which requests queued at
                # the server stretch (a box of 8 slots sent 64 was planned at 2.7x its
                # pace a minute in, 1.4x after five).
                rate = server.tokens / (running_s - fill)
            elif price == 0 and server.capacity and server.first_tokens and fill > 0:
                # A free lane not settled yet, whose server says how many it runs at once:
                # that many slots at its first answer's pace (which never waited for a
                # slot). Its rate per request times the lane's width said 8x its pace for a
                # box of 8 slots sent 64, whose first answers had not queued.
                slots = min(server.limit or self.config.max_concurrency, server.capacity)
                rate = slots * server.first_tokens / fill
            else:
                # A priced lane is held to its share (and a free one has not run long enough
                # to tell): its rate per request, at full width.
                slots = server.limit or self.config.max_concurrency
                rate = server.tokens / server.request_s * slots if server.request_s > 0 else 0.0
            state = LaneState.UP
            if server.unpaid:
                state = LaneState.UNPAID
            elif server.down_until > now or server.draining:
                state = LaneState.DOWN
            elif server.failures:  # failed last time and not answered since
                state = LaneState.FAILING
            # A whole answer's time before its tokens count: a lane cannot finish sooner
            # than one answer takes (the slow box must not be handed the last few tokens).
            name = self.lane_name(server)
            seen = self.rates.setdefault(name, [])
            if state is LaneState.UP and rate > 0:
                seen.append((now, rate))
                seen[:] = [(t, r) for t, r in seen if now - t <= TREND_WINDOW_S]
            trend = rate_trend(seen, now)
            lanes.append(Lane(name, rate, price, latency, trend, state))
        if self.batch is not None and self.batch.spec is not None:
            lanes.append(self.batch.planned(now))
        return lanes

    def tail_margins(self, lanes: Sequence[Lane]) -> tuple[float, float]:
        """The time the plan keeps before the deadline (`finish_margin`) from the live
        `lanes` measured now: the slowest one's answer at its tail, and the taper's rounds
        at the soonest one's answers; and the same at their mean times (the likely tail)."""
        times = []
        for server, lane in zip(self.runner.servers, lanes, strict=True):
            measured = request_times(server)
            if lane.usable and measured is not None:
                times.append(measured)
        if not times:
            return 0.0, 0.0
        soonest = min(times, key=lambda measured: measured.mean_s)
        rounds = self.taper_rounds()
        return finish_margin(times, rounds, soonest), finish_margin(times, rounds, soonest, 0)

    def taper_rounds(self) -> float:
        """The rounds the budget's taper adds to the plan, at most over the datasets
        (backends/engine/taper.py: walked from the tokens on disk and in flight, by the
        budget's own rule on copies of each dataset's length models that learn as it goes,
        as many answers a round as the live lanes take at once)."""
        servers = [s for s in self.runner.servers if s.answers and s.has_slot()]
        answers = sum(s.answers for s in servers)
        if not answers:
            return 0.0
        mean = sum(s.tokens for s in servers) / answers
        width = sum(s.limit or self.config.max_concurrency for s in servers)
        config, cap = self.config, self.answer_limit.tokens
        if mean <= 0 or config.turns is Turns.ALL:
            return 0.0
        now = time.monotonic()
        most = 0.0
        for ds in self.datasets:
            if ds.state.finished or ds.budget.max_tokens is None:
                continue
            turns = ds.turns_max if config.budget_mode is BudgetMode.STRICT else ds.turns_mean
            rule = TaperRule(config.budget_mode, config.crossing_answer, cap, width, turns)
            # From what is left once the answers in flight are in, at the mean answer: the
            # plan's tokens (`remaining`) are those beyond them, and the taper's rounds are
            # theirs (counted from the tokens on disk, an answer in flight was counted again
            # as one to send, and the rounds moved as answers landed).
            flying = sum(min(mean, entry.max_new_tokens) for entry in ds.inflight)
            lengths = walk_lengths(ds.model, mean, cap)
            walk = TaperWalk(rule, ds.budget, ds.model, ds.expected, lengths, now)
            rounds = walk.rounds(ds.tokens + flying, ds.budget_samples + len(ds.inflight))
            most = max(most, rounds)
        return most

    def remaining(self) -> int | None:
        """Completion tokens the run still has to make beyond those in flight (None: some
        dataset has no token budget, and there is nothing to plan)."""
        left = 0.0
        for ds in self.datasets:
            if ds.state.finished:
                continue
            if ds.budget.max_tokens is None:
                return None
            left += max(0, ds.budget.max_tokens - ds.tokens)
        inflight = sum(s.outstanding * s.mean_answer for s in self.runner.servers)
        if self.batch is not None:
            inflight += self.batch.outstanding()
        return max(0, math.ceil(left - inflight))

    def replan(self) -> Plan | None:
        """Plan now and hand each priced lane its share; say what changed."""
        remaining = self.remaining()
        if remaining is None:
            return None
        now = time.monotonic()
        lanes = self.measured()
        deadline = None
        likely_s = 0.0
        if self.deadline_at is not None:
            # Less the run's tail (backends/plan/margin.py): the last answers in flight, and
            # the budget's taper, answers one after another on the soonest lane. (The live
            # lanes': a batch lane's turnaround is in its capacity already.)
            self.margin_s, likely_s = self.tail_margins(lanes[: len(self.runner.servers)])
            deadline = max(1e-3, self.deadline_at - now - self.margin_s)
        cap = None
        if self.max_cost is not None:
            # What the tokens beyond those in flight may cost (`remaining`): the answers in
            # flight are paid from the cap too, at their mean (`committed`), less a reserve
            # for what they may run past it (`cap_reserve`).
            cap = max(0.0, self.room())
        made = plan(lanes, remaining, deadline, cap)
        if made.status is PlanStatus.LATE and self.deadline_at is not None:
            # Late only by the margin's caution (its deviations above the mean request
            # times): planned to the likely tail, and not said. In the last seconds the
            # margin is all the time left, and a run that ended 5 s before its deadline
            # had said `no lane mix meets the deadline: the best finish is 0s late` 8 s
            # before it, in the warning's colour on the panel.
            likely = plan(lanes, remaining, max(1e-3, self.deadline_at - now - likely_s), cap)
            if likely.status is PlanStatus.MEETS:
                made = likely
        batch = self.batch
        if batch is not None and batch.spec is not None:
            if made.status is PlanStatus.STALLED:
                batch.allowance = 0.0  # nothing known of it to send on
            else:
                batch.allowance = float(made.tokens[batch.spec.name])  # beyond its flights
            batch.land_by = None
            if self.deadline_at is not None:
                batch.land_by = self.deadline_at - self.margin_s
            lanes = lanes[: len(self.runner.servers)]
        every = self.interval(now)
        for server, lane in zip(self.runner.servers, lanes, strict=True):
            server.probe_left = None
            if made.status is PlanStatus.STALLED:
                server.allowance = math.inf
            else:
                share = float(made.tokens[lane.name])
                if lane.price > 0 and made.finish_s > every:
                    # Bought at the pace of the plan, not at once: what this interval needs
                    # of it. A free lane misjudged early (its rate, from its first answers)
                    # is then corrected before a fast priced lane has spent the mistake.
                    share *= every / made.finish_s
                server.allowance = share + server.outstanding * server.mean_answer
        old, self.current = self.current, made
        self.view = self._view(made, now)
        changed, self._changed = self._changed, None
        if old is None:
            self._say(f"plan: {made.line()} ({made.note})", made)
        else:
            why = explain(old, made, changed)
            if why is None and changed is not None:
                why = f"{changed} ({made.note})"
            if why is not None:
                self._say(f"plan changed: {why}; now {made.line()}", made)
        self.signals.wake.set()
        return made

    def _view(self, made: Plan, now: float) -> PlanView:
        """`made` in wall-clock terms, with what was spent before it."""
        wall = time.time()
        lanes = [LanePlan.share(lane, made.tokens.get(lane.name, 0), wall) for lane in made.lanes]
        deadline = None
        if self.deadline_at is not None:
            deadline = wall + max(0.0, self.deadline_at - now)
        return PlanView(
            made_at=wall,
            status=str(made.status),
            lanes=tuple(lanes),
            finish_at=wall_time(made.finish_s, wall),
            cost=self.cost.total() + made.cost,
            max_cost=self.max_cost,
            deadline_at=deadline,
            note=made.note,
            remaining=made.remaining,
            spent=self.cost.total(),
        )

    def retarget(self, target: PlanTarget, by: str = "the panel") -> None:
        """A new deadline and cap (from the panel, or a control file): re-plan at once.
        Raises DeadlineError for a deadline that is no longer one (checked when written)."""
        deadline_at = None
        if target.deadline is not None:
            deadline_at = time.monotonic() + parse_deadline(target.deadline)
        self.deadline_at = deadline_at
        self.max_cost = target.max_cost
        self._changed = f"{target.said()}, set by {by}"
        self.reporter.event("info", f"plan target: {target.said()} (set by {by})")
        if self.current is not None:
            self.replan()
        self.stalled.set()  # the loop's wait ends: the next interval starts from now

    def _read_controls(self) -> list[tuple[str, PlanTarget | str]]:
        """Each dataset folder's control file changed since last looked at, and written since
        the run started (an older one is an earlier run's). Its file times are this host's
        clock, unlike `written_at` (the panel's): the times compared are the file's. In a
        worker thread: a folder on a slow disk never holds the engine's loop."""
        found: list[tuple[str, PlanTarget | str]] = []
        for ds in self.datasets:
            path = ds.folder / CONTROL_FILE
            try:
                stat = path.stat()
                if stat.st_mtime < self._started_wall or self._seen.get(str(path)) == (
                    stat.st_mtime_ns,
                    stat.st_size,
                ):
                    continue
                self._seen[str(path)] = (stat.st_mtime_ns, stat.st_size)
                target = read_target(path)
            except FileNotFoundError:
                continue
            except (OSError, ControlError) as exc:
                found.append((str(path), f"{exc}"))
                continue
            if target is not None:
                found.append((str(path), target))
        return found

    async def check_controls(self) -> bool:
        """Apply the newest control file that came, if one did; say one that cannot be used.
        Whether the target changed."""
        found = await asyncio.to_thread(self._read_controls)
        newest: tuple[str, PlanTarget] | None = None
        for path, what in found:
            if isinstance(what, str):
                self.reporter.event("warning", f"{path}: ignored: {what}")
            elif newest is None or what.written_at > newest[1].written_at:
                newest = (path, what)
        if newest is None:
            return False
        try:
            self.retarget(newest[1], by=newest[0])
        except ValueError as exc:
            self.reporter.event("warning", f"{newest[0]}: ignored: {exc}")
            return False
        return True

    def _say(self, line: str, made: Plan) -> None:
        self.history.append(line)
        late = made.status in (PlanStatus.LATE, PlanStatus.SHORT, PlanStatus.STALLED)
        self.reporter.event("warning" if late else "info", line)

    def interval(self, now: float) -> float:
        """The time to the next re-plan: `plan_every`, or with a deadline nearer than
        PLAN_SHARE of those, a PLAN_SHARE-th of the time left (at least PLAN_MIN_S, or
        `plan_every` if that is shorter)."""
        every = self.config.plan_every
        if self.deadline_at is None:
            return every
        left = self.deadline_at - now
        return min(every, max(PLAN_MIN_S, left / PLAN_SHARE))

    async def run(self) -> None:
        """The first plan once every lane up has answered, then one every `interval`."""
        while True:
            ready = all(
                s.answers >= FIRST_PLAN_ANSWERS or s.down_until > time.monotonic()
                for s in self.runner.servers
            )
            if ready:
                break
            await asyncio.sleep(CHECK_S)
        while True:
            await self.check_controls()
            self.replan()
            planned = time.monotonic()
            self.stalled.clear()
            every = self.interval(planned)
            due = planned + every
            while not self.stalled.is_set() and time.monotonic() < due:
                try:
                    await within(self.stalled.wait(), min(CONTROL_POLL_S, every))
                except TimeoutError:
                    if await self.check_controls():
                        break  # re-planned at once; the next interval starts from now
                    continue
                # At most one re-plan per CHECK_S however stalled, counted from the last one:
                # a stall long after it is re-planned at once (the budget's last answers
                # waited CHECK_S on a plan 1.2 s old, and a 20 s run ended 0.5 s late).
                await asyncio.sleep(max(0.0, planned + CHECK_S - time.monotonic()))
