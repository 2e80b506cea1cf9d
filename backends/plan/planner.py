"""The plan: the least-cost split of the tokens left over the lanes, by a deadline, within a
spend cap; and the one line that says why a re-plan changed it.

At a fixed finish time `T` the problem is a small linear program: minimise sum(price_i *
x_i) subject to sum(x_i) = N and 0 <= x_i <= capacity_i(T). One equality over boxes: filling
the cheapest lanes first is optimal (the fractional knapsack), so it is solved in closed
form. Its least cost never rises as `T` grows (every capacity grows), so the earliest `T`
that meets a cost bound is found by bisection. Lanes of one price share their tier in
proportion to their capacity, so they finish together.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from gen_tui.backends.figures import format_count, format_dollars, format_duration
from gen_tui.backends.plan.lanes import Lane

_BISECT_STEPS = 200
_TIME_RESOLUTION = 1e-6
"""Relative: the bisection stops when the finish is known to this share of itself."""
_COST_SLACK = 1e-9
"""Relative slack on cost comparisons, for the float sums of the fill."""
_MOVED_SHARE = 0.05
"""A re-plan is said when some lane's tokens move by more than this share of those left."""


class PlanStatus(enum.StrEnum):
    MEETS = "meets"
    """It finishes by the deadline (or, without one, at the least cost) within the cap."""
    LATE = "late"
    """The deadline cannot be met within the cap: planned for the best finish it allows."""
    SHORT = "short"
    """The cap cannot buy the tokens left at any finish time: planned for what it buys."""
    STALLED = "stalled"
    """No lane is up."""


@dataclass(frozen=True)
class Plan:
    """Tokens per lane, what they cost, and when the last of them arrives (seconds from now)."""

    status: PlanStatus
    tokens: dict[str, int]
    cost: float
    finish_s: float
    remaining: int
    deadline_s: float | None
    max_cost: float | None
    lanes: tuple[Lane, ...]
    note: str

    def line(self) -> str:
        """The plan in one line, for the panel's header and the log:
        `box 61M · api 31M $43 · finish in 5h20m · $43 of $60`."""
        prices = {lane.name: lane.price for lane in self.lanes}
        parts = []
        for name, tokens in self.tokens.items():
            if tokens <= 0:
                continue
            spend = tokens * prices[name]
            parts.append(
                f"{name} {format_count(tokens)}" + (f" {format_dollars(spend)}" * (spend > 0))
            )
        if self.status is PlanStatus.STALLED:
            return self.note
        parts.append(f"finish in {format_duration(self.finish_s)}")
        spent = format_dollars(self.cost)
        parts.append(f"{spent} of {format_dollars(self.max_cost)}" if self.max_cost else spent)
        return " · ".join(parts)


def _fill(lanes: Sequence[Lane], tokens: float, window_s: float) -> dict[str, float] | None:
    """The least-cost split of `tokens` among `lanes` within `window_s`, or None when their
    capacities together fall short of it."""
    caps = {lane.name: lane.capacity(window_s) for lane in lanes}
    if sum(caps.values()) < tokens * (1 - _COST_SLACK):
        return None
    split = dict.fromkeys(caps, 0.0)
    left = tokens
    for price in sorted({lane.price for lane in lanes}):
        tier = [lane.name for lane in lanes if lane.price == price and caps[lane.name] > 0]
        room = sum(caps[name] for name in tier)
        if room <= 0:
            continue
        share = min(1.0, left / room)
        for name in tier:
            split[name] = caps[name] * share
        left -= min(left, room)
        if left <= 0:
            break
    return split


def _cost(lanes: Sequence[Lane], split: dict[str, float]) -> float:
    return sum(lane.price * split[lane.name] for lane in lanes)


def least_cost(lanes: Sequence[Lane], tokens: float, window_s: float) -> float | None:
    """The least a split of `tokens` finishing within `window_s` costs (None: none can)."""
    split = _fill(lanes, tokens, window_s)
    return None if split is None else _cost(lanes, split)


def _earliest(lanes: Sequence[Lane], tokens: float, bound: float, hi: float) -> float:
    """The earliest finish by which `tokens` cost at most `bound`; `hi` is one that does."""

    def ok(window_s: float) -> bool:
        cost = least_cost(lanes, tokens, window_s)
        return cost is not None and cost <= bound + _COST_SLACK * max(1.0, bound)

    lo = 0.0
    for _ in range(_BISECT_STEPS):
        if hi - lo <= _TIME_RESOLUTION * max(1.0, hi):
            break
        mid = (lo + hi) / 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _whole(split: dict[str, float], total: int, prices: dict[str, float]) -> dict[str, int]:
    """Whole tokens summing to `total`: floors, then one more each to the cheapest lanes
    with a fraction left. That never costs more than the fractional split (the cheapest
    `k` of the fractions cost at most what the `k` tokens they sum to cost), so rounding
    never passes the cap."""
    floors = {name: math.floor(value) for name, value in split.items()}
    short = total - sum(floors.values())
    order = sorted(
        (name for name in split if split[name] > floors[name]),
        key=lambda name: (prices[name], floors[name] - split[name]),
    )
    for name in order[: max(0, short)]:
        floors[name] += 1
    return floors


def _horizon(lanes: Sequence[Lane], tokens: float) -> float:
    """A finish by which each usable lane alone could deliver `tokens` (so the fill there
    reaches the least cost there is); it grows until it does, for lanes that slow down."""
    horizon = max(lane.turnaround_s + tokens / lane.rate for lane in lanes if lane.usable)
    for _ in range(64):
        if all(lane.capacity(horizon) >= tokens for lane in lanes if lane.usable):
            break
        horizon *= 2
    return horizon


def plan(
    lanes: Sequence[Lane],
    remaining: int,
    deadline_s: float | None = None,
    max_cost: float | None = None,
) -> Plan:
    """How many of `remaining` tokens each lane takes.

    - Without a deadline: the least cost there is (the free lanes alone, when one is up),
      at the earliest finish that keeps it.
    - With a deadline: the cheapest split that meets it, finishing as early as that cost
      allows (free lanes never idle).
    - Past the cap, or when no split meets the deadline: the earliest finish the cap
      allows (LATE); when no finish does, what the cap buys (SHORT). Said in `note`.
    """
    lanes = tuple(lanes)
    names = [lane.name for lane in lanes]
    if len(set(names)) != len(names):
        raise ValueError(f"lane names repeat: {', '.join(names)}")
    if max_cost is not None and not max_cost >= 0:
        raise ValueError(f"a spend cap is a sum of dollars, 0 or more, not {max_cost}")

    def made(
        status: PlanStatus, split: dict[str, float], total: int, finish: float, note: str
    ) -> Plan:
        whole = _whole(split, total, {lane.name: lane.price for lane in lanes})
        cost = sum(lane.price * whole[lane.name] for lane in lanes)
        return Plan(status, whole, cost, finish, remaining, deadline_s, max_cost, lanes, note)

    if remaining <= 0:
        return made(PlanStatus.MEETS, dict.fromkeys(names, 0.0), 0, 0.0, "nothing left to plan")
    usable = [lane for lane in lanes if lane.usable]
    if not usable:
        return made(
            PlanStatus.STALLED, dict.fromkeys(names, 0.0), 0, math.inf, "no lane is up: no plan"
        )
    cap = math.inf if max_cost is None else max_cost
    horizon = _horizon(lanes, remaining)
    floor_cost = least_cost(lanes, remaining, horizon)
    assert floor_cost is not None  # every usable lane alone delivers it by the horizon
    if floor_cost > cap + _COST_SLACK * max(1.0, cap):
        cheapest = min(lane.price for lane in usable)
        bought = min(remaining - 1, math.floor(cap / cheapest)) if cheapest > 0 else remaining
        part = plan(lanes, bought, deadline_s, max_cost)
        note = (
            f"the {format_dollars(cap)} cap buys {format_count(bought)} of the "
            f"{format_count(remaining)} tokens left, with no free lane up: the run stops there"
        )
        return Plan(
            PlanStatus.SHORT,
            part.tokens,
            part.cost,
            part.finish_s,
            remaining,
            deadline_s,
            max_cost,
            lanes,
            note,
        )
    if deadline_s is None:
        finish = _earliest(lanes, remaining, floor_cost, horizon)
        split = _fill(lanes, remaining, finish)
        assert split is not None
        free = any(lane.price == 0 for lane in usable)
        note = "no deadline: " + ("the free lanes alone" if free else "the cheapest lane alone")
        return made(PlanStatus.MEETS, split, remaining, finish, note)
    at_deadline = least_cost(lanes, remaining, deadline_s)
    if at_deadline is not None and at_deadline <= cap + _COST_SLACK * max(1.0, cap):
        finish = _earliest(lanes, remaining, at_deadline, deadline_s)
        split = _fill(lanes, remaining, finish)
        assert split is not None
        note = (
            "the free lanes meet the deadline" if at_deadline == 0 else "deadline met at least cost"
        )
        return made(PlanStatus.MEETS, split, remaining, finish, note)
    finish = _earliest(lanes, remaining, cap, horizon)
    split = _fill(lanes, remaining, finish)
    assert split is not None
    why = (
        "no lane mix meets the deadline"
        if at_deadline is None
        else (
            f"meeting the deadline costs {format_dollars(at_deadline)}, "
            f"over the {format_dollars(cap)} cap"
        )
    )
    late = format_duration(finish - deadline_s)
    note = f"{why}: the best finish is {late} late, in {format_duration(finish)}"
    return made(PlanStatus.LATE, split, remaining, finish, note)


def explain(old: Plan, new: Plan, changed: str | None = None) -> str | None:
    """One line saying why `new` moved tokens from where `old` had them, or None when it
    did not (a re-plan that only trims what was done says nothing):
    `api lane down: 12M moved to batch`. `changed` is the caller's reason when it changed
    the deadline or the cap (a relative deadline shrinks by itself as time passes)."""
    worse = new.status is not old.status and new.status in (PlanStatus.LATE, PlanStatus.SHORT)
    scale = max(old.remaining, new.remaining, 1)
    share_old = {name: tokens / max(old.remaining, 1) for name, tokens in old.tokens.items()}
    share_new = {name: tokens / max(new.remaining, 1) for name, tokens in new.tokens.items()}
    names = list(dict.fromkeys([*share_old, *share_new]))
    delta = {
        name: (share_new.get(name, 0.0) - share_old.get(name, 0.0)) * new.remaining
        for name in names
    }
    giver = min(names, key=lambda name: delta[name])
    if -delta[giver] <= _MOVED_SHARE * scale:
        return new.note if worse else None
    before = {lane.name: lane for lane in old.lanes}
    after = {lane.name: lane for lane in new.lanes}
    lane = after.get(giver)
    was = before.get(giver)
    # Each taker's rise in rate: a box read at 246 tok/s and then at 760 takes tokens back
    # from an API whose rate moved by 0.3% (`api slower (126,460 → 126,065 tok/s)` said why).
    rises = {
        name: now.rate / before[name].rate - 1
        for name, now in after.items()
        if name in before and before[name].rate > 0 and delta.get(name, 0) > 0
    }
    risen = max(rises, key=lambda name: rises[name], default=None)
    if lane is None:
        reason = f"{giver} lane gone"
    elif lane.state.value != "up":
        reason = f"{giver} lane {lane.state.value}"
    elif (
        was is not None
        and f"{lane.rate:,.0f}" != f"{was.rate:,.0f}"
        and lane.rate < was.rate
        and (risen is None or 1 - lane.rate / was.rate >= rises[risen])
    ):
        reason = f"{giver} slower ({was.rate:,.0f} → {lane.rate:,.0f} tok/s)"
    elif back := [
        name
        for name, now in after.items()
        if now.usable and name in before and not before[name].usable and delta[name] > 0
    ]:
        reason = f"{' and '.join(back)} lane up again"
    elif changed is not None:
        reason = changed
    elif risen is not None and round(after[risen].rate) > round(before[risen].rate):
        reason = f"{risen} faster ({before[risen].rate:,.0f} → {after[risen].rate:,.0f} tok/s)"
    else:
        reason = "rates changed"
    takers = [name for name in names if delta[name] > _MOVED_SHARE * scale]
    moved = -delta[giver]
    where = " and ".join(takers) if takers else "the others"
    line = f"{reason}: {format_count(moved)} moved to {where}"
    return f"{line}; {new.note}" if worse else line
