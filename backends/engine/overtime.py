"""The deadline's watch over the answers running on a fleet's slow free lane.

Why: the route (fleet.py `route`) stops sending to the box when a request would land within
the plan's margin, but an answer sent before that may be one of the long tail of lengths:
the budget's last answers wait on it (its rule counts what it may still add), and the run
ends when it lands. A box at 12.5 tok/s a request, answers of a mean of 60 tokens with a cv
of 2 and a cap of 1,000, held a 20 s run's last 5% for a minute: done 61 s late. Each look,
an answer on a free lane that its lane's pace says will land past the deadline, and that a
faster lane would deliver whole sooner, is called off there and sent again to that lane
(moves.py): the box's time spent on it is lost, the deadline is kept, and the answer's
price on the faster lane is what the cap allows.

How long an answer running still has: its lane's latency line says how far it has got by its
age (or its stream says, exactly), and an answer that has run past its lane's mean is
expected to run about as long again (a heavy tail's rule of thumb, as the budget's
`Survival.tail`), up to its cap. An answer in the bulk of its lane's lengths is not moved
while the deadline is further off than its time to go: the route's margin was made for it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter

from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.fleet import CHECK_S, FleetPlanner
from gen_tui.backends.engine.runner import RequestRunner, Server
from gen_tui.backends.figures import counted
from gen_tui.backends.plan import PlanStatus


class OvertimeWatch(RunPart):
    """Moves a fleet's running answers off a free lane when they would land past the deadline."""

    def __init__(self, run: RunContext, planner: FleetPlanner, runner: RequestRunner) -> None:
        super().__init__(run)
        self.planner = planner
        self.runner = runner
        self.moved: Counter[tuple[str, str]] = Counter()
        """Answers moved so far, by (from, to) lane: the run's end says how many."""

    async def run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_S)
            self.look(time.monotonic())

    def look(self, now: float) -> int:
        """One look: the answers moved."""
        planner = self.planner
        made = planner.current
        if planner.deadline_at is None or made is None or made.status is PlanStatus.STALLED:
            return 0
        if self.signals.stopping:
            return 0
        moved = 0
        for server in self.runner.servers:
            if planner.price(server) > 0 or not server.flying:
                continue
            for rid, entry in list(server.flying.items()):
                if rid not in self.runner.moves:
                    continue
                late = self._lands(
                    server, now - entry.started, entry.produced, entry.max_new_tokens
                )
                if late is None or late[0] <= planner.deadline_at - now:
                    continue
                to, takes = self._sooner(server, late[1], late[0])
                if to is None:
                    continue
                if not self.runner.move_request(rid, to):
                    continue
                moved += 1
                self._say(server, to, now, late, takes)
        return moved

    @staticmethod
    def _lands(server: Server, age: float, streamed: int, cap: int) -> tuple[float, float] | None:
        """(seconds until it lands, its expected length) of an answer running `age` seconds
        on `server`, `streamed` tokens of it seen, capped at `cap` (None: the lane's pace is
        not known yet)."""
        line = server.line.fitted()
        mean = server.mean_answer
        if line is None or mean <= 0:
            return None
        start_s, per_token_s = line
        made = max(float(streamed), (age - start_s) / per_token_s if per_token_s > 0 else 0.0)
        length = min(float(cap), max(mean, 2.0 * made))
        return max(0.0, length - made) * per_token_s, length

    def _sooner(self, server: Server, length: float, left_s: float) -> tuple[Server | None, float]:
        """The lane that delivers an answer of `length` whole soonest, sooner than `left_s`
        (what it has to go where it runs), with a free slot and its price within the cap."""
        planner = self.planner
        room = math.inf
        if planner.max_cost is not None:
            room = planner.max_cost - planner.committed()
        best: Server | None = None
        best_s = left_s
        for other in self.runner.servers:
            if other is server or not other.has_slot():
                continue
            if planner.price(other) * length > room:
                continue
            takes = other.expected_s(length)
            if takes is not None and takes < best_s:
                best, best_s = other, takes
        return best, best_s

    def _say(
        self, server: Server, to: Server, now: float, late: tuple[float, float], takes: float
    ) -> None:
        """The first move between two lanes, in one line (a deadline's end may move many)."""
        planner = self.planner
        key = (planner.lane_name(server), planner.lane_name(to))
        self.moved[key] += 1
        if self.moved[key] > 1 or planner.deadline_at is None:
            return
        left = planner.deadline_at - now
        self.reporter.event(
            "info",
            f"{max(0.0, left):.1f} s to the deadline: an answer on {key[0]} would land "
            f"{late[0] - left:.1f} s past it (about {late[1]:.0f} tokens): sent again to "
            f"{key[1]} ({takes:.1f} s); what {key[0]} made of it is dropped",
        )

    def tally(self) -> str | None:
        """The moves of the whole run in one line (None: none), for its end: the log said
        only the first of each pair of lanes."""
        if not self.moved:
            return None
        pairs = ", ".join(
            f"{counted(count, 'answer')} from {source} to {to}"
            for (source, to), count in self.moved.items()
        )
        return f"moved near the deadline, as they would have landed past it: {pairs}"
