"""How long before the deadline the plan must finish its bulk: the run's tail, from measured
request times.

A plan that delivers its tokens at the lanes' rates by the deadline still ends late: its
last tokens do not come at a rate. Two things follow the bulk, and both are in the margin:

- the last answers in flight on each lane must land: a lane's capacity already waits one
  answer at its mean request time (`Lane.turnaround_s`), not at its tail; the margin keeps
  the rest of the tail (MARGIN_Z deviations) of the slowest-spread live lane;
- the budget's taper: as the room left shrinks the dataset keeps fewer answers out (the
  budget rule holds back what the ones in flight may add), down to one at a time, each sent
  once the last is back: `rounds` answers' time beyond what the lanes' rate gives them
  (counted by the engine from the budget's own rule, `FleetPlanner.taper_rounds`).
  Near the deadline they go to the lane that answers soonest (`FleetPlanner.route`), so
  they take `rounds` of its answers, one after another: their sum, `rounds` means plus
  MARGIN_Z deviations of a sum of `rounds`.

On the simulator (bench fleet_plan, 15 s deadline, 5 December) a margin of one mean box
answer (1.05 s) let the run end 0.5 s late: the box's last answer took 0.67 s after 13.94 s,
then four answers of the API went one at a time at 0.18 to 0.25 s each, 14.60 to 15.52 s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MARGIN_Z = 2.0
"""Deviations above the mean a request time is planned at (about its 98th percentile for a
normal spread): the margin is for the run's last answers, whose lateness is the deadline's."""


@dataclass(frozen=True)
class RequestTimes:
    """One live lane's measured request times: their mean and standard deviation (seconds)."""

    mean_s: float
    sd_s: float = 0.0

    def tail_s(self, z: float = MARGIN_Z) -> float:
        return self.mean_s + z * self.sd_s


def finish_margin(
    lanes: Sequence[RequestTimes],
    rounds: float,
    soonest: RequestTimes | None,
    z: float = MARGIN_Z,
) -> float:
    """Seconds the plan keeps before the deadline: the widest tail of `lanes` past their mean
    answer (which their capacity waits already), or `rounds` answers of the `soonest` lane
    one after another (the taper), whichever is longer: the slow lane's last answers are
    among those the taper's rounds wait on (the budget counts them in flight), so the two
    overlap rather than add. `z`: the deviations kept above the means (0: the likely
    tail, what a plan late only by the margin's caution is judged by)."""
    last = max((lane.tail_s(z) - lane.mean_s for lane in lanes), default=0.0)
    if soonest is None or rounds <= 0:
        return last
    taper = rounds * soonest.mean_s + z * math.sqrt(rounds) * soonest.sd_s
    return max(last, taper)
