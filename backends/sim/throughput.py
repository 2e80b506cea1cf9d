"""The simulator's measured decode rate: its generated-token counter read over time.

Its own module, below both users: the pipeline keeps one (`Simulator.throughput`) and
`/metrics` (metrics.py) reads it, so neither of those two imports the other at run time.
"""

from __future__ import annotations

from collections import deque

__all__ = ["RATE_WINDOW_S", "Throughput"]

RATE_WINDOW_S = 5.0
"""How far back `gen_throughput` looks: about SGLang's decode log interval, short enough
that a change of load shows within a panel's refresh or two."""
_MARK_EVERY_S = 0.25


class Throughput:
    """The generated-token counter as read over time, for a measured rate.

    The sum of the running requests' nominal speeds is what the slots would do on an idle
    machine: with the engine and the simulator sharing a core it said 1.1M tok/s beside a
    header of 318k, and 0 while every stream was behind its schedule. The counter's rise
    over the window is what was actually generated; `SimLoad` reports it whenever the
    simulator runs behind its schedule.
    """

    def __init__(self) -> None:
        self.marks: deque[tuple[float, int]] = deque()

    def rate(self, now: float, generated: int) -> float:
        """Tokens a second over the last RATE_WINDOW_S (since the first read, if later)."""
        marks = self.marks
        while len(marks) > 1 and now - marks[1][0] >= RATE_WINDOW_S:
            marks.popleft()
        if not marks or now - marks[-1][0] >= _MARK_EVERY_S:
            marks.append((now, generated))
        since, base = marks[0]
        return max(0.0, (generated - base) / (now - since)) if now > since else 0.0
