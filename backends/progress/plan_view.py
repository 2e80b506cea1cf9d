"""The fleet plan as progress.json and the panel carry it: each lane's planned tokens, cost
and finish, the whole plan's finish and cost, the cap and the deadline, and when it was made.

Wall-clock times (Unix seconds), not "in 5h20m": a file read a minute late, or on another
host, still says when. The reader takes another writer's file (or an attacker's) field by
field and bounded: a plan that is no object, or has no lanes, is no plan; a lane of the
wrong shape is left out; at most MAX_LANES lanes, names cut to LANE_NAME_CHARS.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from gen_tui.backends.bounds import COUNT, DOLLARS, RATE, SECONDS, UNIX_TIME
from gen_tui.backends.plan import Lane, LaneState, plan
from gen_tui.backends.untrusted import one_line

MAX_LANES = 16
"""The most lanes read from one plan (a fleet names a few)."""
LANE_NAME_CHARS = 40
NOTE_CHARS = 240
"""The planner's note: one line (`meeting the deadline costs $78.00, over the $60.00 cap`)."""
LANE_STATES = frozenset({"up", "down", "failing", "out of credits"})
"""backends.plan.LaneState's values (an unknown one reads as down: planned at nothing)."""
STATUSES = frozenset({"meets", "late", "short", "stalled"})
"""backends.plan.PlanStatus's values, as the file says them (an unknown one reads as late:
the panel flags what it cannot vouch for)."""


@dataclass(frozen=True, slots=True)
class LanePlan:
    """One lane's share of the plan."""

    name: str
    tokens: int
    cost: float
    """Dollars its planned tokens cost (0 for a free lane)."""
    finish_at: float | None
    """When its last planned token arrives (None: it takes none, or its rate is unknown)."""
    rate: float = 0.0
    """Its measured tok/s, price per token, answer time and state when planned: what a
    panel re-plans from to preview a new deadline or cap before it is applied."""
    price: float = 0.0
    turnaround_s: float = 0.0
    state: str = "up"

    @classmethod
    def share(cls, lane: Lane, tokens: int, wall: float) -> LanePlan:
        """`lane`'s share of a plan made at wall-clock `wall`: its finish is its answer
        time plus its tokens at its rate (the engine's plan and a panel's preview alike)."""
        finish = None
        if tokens > 0 and lane.rate > 0:
            finish = wall_time(lane.turnaround_s + tokens / lane.rate, wall)
        return cls(
            lane.name,
            tokens,
            tokens * lane.price,
            finish,
            lane.rate,
            lane.price,
            lane.turnaround_s,
            str(lane.state),
        )


@dataclass(frozen=True, slots=True)
class PlanView:
    """The run's current plan (see backends/plan/planner.py for how it is made)."""

    made_at: float
    status: str
    lanes: tuple[LanePlan, ...]
    finish_at: float | None
    """When the last planned token arrives (None: no lane is up)."""
    cost: float
    """Dollars spent so far plus what the plan buys."""
    max_cost: float | None
    deadline_at: float | None
    note: str = ""
    remaining: int = 0
    """The tokens it planned (those left beyond the ones in flight)."""
    spent: float = 0.0
    """Dollars spent before it (its `cost` less what it buys)."""

    @property
    def over_cap(self) -> bool:
        return self.max_cost is not None and self.cost > self.max_cost * (1 + 1e-9)

    @property
    def misses_deadline(self) -> bool:
        if self.status != "meets" and self.deadline_at is not None:
            return True
        if self.deadline_at is None:
            return False
        return self.finish_at is None or self.finish_at > self.deadline_at

    @property
    def flagged(self) -> bool:
        """The plan misses the deadline, passes the cap, or cannot be made (said in red)."""
        return self.over_cap or self.misses_deadline or self.status in ("short", "stalled")

    def to_json(self) -> dict[str, Any]:
        return {
            "made_at": self.made_at,
            "status": self.status,
            "lanes": [
                {
                    "name": lane.name,
                    "tokens": lane.tokens,
                    "cost": lane.cost,
                    "finish_at": lane.finish_at,
                    "rate": lane.rate,
                    "price": lane.price,
                    "turnaround_s": lane.turnaround_s,
                    "state": lane.state,
                }
                for lane in self.lanes
            ],
            "finish_at": self.finish_at,
            "cost": self.cost,
            "max_cost": self.max_cost,
            "deadline_at": self.deadline_at,
            "note": self.note,
            "remaining": self.remaining,
            "spent": self.spent,
        }

    @classmethod
    def from_json(cls, value: Any) -> PlanView | None:
        """A progress.json's `plan`; None when it is no object or names no valid lane."""
        if not isinstance(value, dict):
            return None
        made_at = UNIX_TIME.check(value.get("made_at"))
        lanes_in = value.get("lanes")
        if made_at is None or not isinstance(lanes_in, list):
            return None
        lanes = tuple(
            lane for lane in (_lane(entry) for entry in lanes_in[:MAX_LANES]) if lane is not None
        )
        if not lanes:
            return None
        status = value.get("status")
        note = value.get("note")
        return cls(
            made_at=made_at,
            status=status if isinstance(status, str) and status in STATUSES else "late",
            lanes=lanes,
            finish_at=UNIX_TIME.check(value.get("finish_at")),
            cost=DOLLARS.check(value.get("cost")) or 0.0,
            max_cost=DOLLARS.check(value.get("max_cost")),
            deadline_at=UNIX_TIME.check(value.get("deadline_at")),
            note=one_line(note, NOTE_CHARS) if isinstance(note, str) else "",
            remaining=int(COUNT.check(value.get("remaining")) or 0),
            spent=DOLLARS.check(value.get("spent")) or 0.0,
        )


def _lane(entry: Any) -> LanePlan | None:
    if not isinstance(entry, dict):
        return None
    name = entry.get("name")
    tokens = COUNT.check(entry.get("tokens"))
    if not isinstance(name, str) or not name.strip() or tokens is None:
        return None
    state = entry.get("state", "up")
    return LanePlan(
        name=lane_name(name),
        tokens=int(tokens),
        cost=DOLLARS.check(entry.get("cost")) or 0.0,
        finish_at=UNIX_TIME.check(entry.get("finish_at")),
        rate=RATE.check(entry.get("rate")) or 0.0,
        price=DOLLARS.check(entry.get("price")) or 0.0,
        turnaround_s=SECONDS.check(entry.get("turnaround_s")) or 0.0,
        state=state if isinstance(state, str) and state in LANE_STATES else "down",
    )


def lane_name(name: str) -> str:
    """A lane's name as read from a file: one line, at most LANE_NAME_CHARS and an ellipsis
    (it sits in a line with others, so no "(N more characters)")."""
    return one_line(name[:LANE_NAME_CHARS]) + ("…" * (len(name) > LANE_NAME_CHARS))


def wall_time(seconds_from_now: float, now: float | None = None) -> float | None:
    """`seconds_from_now` as a Unix time (None: never, for an infinite or unknown span)."""
    if not math.isfinite(seconds_from_now) or seconds_from_now < 0:
        return None
    return (time.time() if now is None else now) + seconds_from_now


def lane_split(value: Any) -> dict[str, int] | None:
    """A progress.json's `lanes` (a dataset's tokens per lane this run); None when it is no
    object; entries of another shape are left out, at most MAX_LANES."""
    if not isinstance(value, dict):
        return None
    split: dict[str, int] = {}
    for name, tokens in list(value.items())[:MAX_LANES]:
        count = COUNT.check(tokens)
        if isinstance(name, str) and name.strip() and count is not None:
            split[lane_name(name)] = int(count)
    return split


def replanned(
    view: PlanView, deadline_s: float | None, max_cost: float | None, now: float | None = None
) -> PlanView | None:
    """What the plan of `view` would be with a new deadline (`deadline_s` from `now`) and
    cap, from the rates it was made with: the dialog's preview before a change is applied
    (the run re-plans from fresh rates once it is). None when `view` carries no rates (a
    writer that predates them)."""
    if not any(lane.rate > 0 for lane in view.lanes):
        return None
    wall = time.time() if now is None else now
    lanes = [
        Lane(lane.name, lane.rate, lane.price, lane.turnaround_s, state=LaneState(lane.state))
        for lane in view.lanes
    ]
    cap = None if max_cost is None else max(0.0, max_cost - view.spent)
    made = plan(lanes, view.remaining, deadline_s, cap)
    shares = [LanePlan.share(lane, made.tokens.get(lane.name, 0), wall) for lane in lanes]
    return PlanView(
        made_at=wall,
        status=str(made.status),
        lanes=tuple(shares),
        finish_at=wall_time(made.finish_s, wall),
        cost=view.spent + made.cost,
        max_cost=max_cost,
        deadline_at=None if deadline_s is None else wall + deadline_s,
        note=made.note,
        remaining=view.remaining,
        spent=view.spent,
    )
