"""A lane as the planner sees it: what it delivers by a given time, and at what price."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class LaneState(enum.StrEnum):
    """Whether a lane takes work now. A down, failing (unreachable, 5xx in a row) or unpaid
    (402: out of credits) lane is planned at no tokens: what it had moves to the others.
    The value is what the plan's line says (`api lane out of credits: 12M moved to box`)."""

    UP = "up"
    DOWN = "down"
    FAILING = "failing"
    UNPAID = "out of credits"


@dataclass(frozen=True)
class Lane:
    """One server (or batch endpoint) of the fleet, from its measured numbers.

    `rate` is its completion tokens per second now, `trend` how that rate changes per
    second (a server slowing as answers lengthen is negative); `price` is dollars per
    completion token (0 for the box); `turnaround_s` is how long before its first tokens
    arrive (a batch lane's observed turnaround; 0 for a live server).

    `wave` is what a batch lane delivers at once each turnaround (its batches in flight at
    most, at its mean answer; 0 for a live server): its tokens come in whole waves, none
    before its first turnaround, and `rate` is then only its pace (wave / turnaround).
    """

    name: str
    rate: float
    price: float = 0.0
    turnaround_s: float = 0.0
    trend: float = 0.0
    state: LaneState = LaneState.UP
    wave: float = 0.0

    def __post_init__(self) -> None:
        for what in ("rate", "price", "turnaround_s", "wave"):
            value = getattr(self, what)
            if not value >= 0:  # NaN fails too
                raise ValueError(f"lane {self.name}: {what} must be a number >= 0, got {value}")

    @property
    def usable(self) -> bool:
        return self.state is LaneState.UP and self.rate > 0

    def capacity(self, window_s: float) -> float:
        """Completion tokens this lane can deliver within `window_s` from now.

        Nothing before its turnaround; after it, the integral of its rate under the trend,
        a rate never below zero (so the capacity never shrinks as the window grows, which
        the planner's search for a finish time relies on)."""
        if not self.usable:
            return 0.0
        if self.wave > 0 and self.turnaround_s > 0:
            return self.wave * math.floor(window_s / self.turnaround_s)  # whole batches
        width = window_s - self.turnaround_s
        if width <= 0:
            return 0.0
        if self.trend < 0:
            width = min(width, self.rate / -self.trend)  # the rate reaches zero there
        return self.rate * width + self.trend * width * width / 2
