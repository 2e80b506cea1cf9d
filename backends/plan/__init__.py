"""The fleet planner: how many of the tokens left each lane takes, so that a run finishes by
its deadline at the least cost and never passes its spend cap (issue 34).

Pure: lanes and numbers in, a :class:`Plan` out; the engine measures, this decides.
"""

from __future__ import annotations

from gen_tui.backends.plan.deadline import DeadlineError, parse_deadline
from gen_tui.backends.plan.lanes import Lane, LaneState
from gen_tui.backends.plan.margin import RequestTimes, finish_margin
from gen_tui.backends.plan.planner import Plan, PlanStatus, explain, plan

__all__ = [
    "DeadlineError",
    "Lane",
    "LaneState",
    "Plan",
    "PlanStatus",
    "RequestTimes",
    "explain",
    "finish_margin",
    "parse_deadline",
    "plan",
]
