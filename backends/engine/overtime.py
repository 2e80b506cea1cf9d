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

How long an answer running still has: as its dataset's budget reads it, how far it has got
by its age on its lane's latency line (or by its stream, exactly), and how long an answer
that has got that far ends, by the survival estimate of the lengths back and in flight (past
the longest seen, about as long again: a heavy tail's rule of thumb, `Survival.tail`), up to
its cap; then its lane's seconds per token. A first version took every answer past its
lane's mean to run as long again: with lengths of a mean of 600 and a cv of 0.95 an answer
2,362 tokens in was expected at 4,724 (the budget's estimate says about 4,270; the answers
seen past it averaged 3,469), and the box's 24 s on it were dropped 23 s before the deadline
while it would have landed in time.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from gen_tui.backends.budget.lengths import SurvivalModel, tokens_by
from gen_tui.backends.budget.precise import read_inflight
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.fleet import CHECK_S, FleetPlanner, soonest
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
        current = planner.current
        if planner.deadline_at is None or current is None or current.status is not PlanStatus.MEETS:
            # A plan that misses the deadline spends the cap on the earliest finish it buys:
            # moving the box's answers keeps no deadline, and drops the box's work. (A cap
            # of $0.02 under a 30 s deadline moved 86 answers, 42 of them after it passed.)
            return 0
        if self.signals.stopping:
            return 0
        moved = 0
        left = planner.deadline_at - now
        outlooks: dict[int, tuple[float, float]] | None = None
        for server in self.runner.servers:
            line = server.line.fitted()
            if planner.price(server) > 0 or not server.flying or line is None:
                continue
            # Only those that could land past the deadline at all (a whole answer at its cap
            # from now): a night's first hours read no estimate.
            open_ = [
                (rid, entry)
                for rid, entry in server.flying.items()
                if rid in self.runner.moves and entry.max_new_tokens * line[1] > left
            ]
            if not open_:
                continue
            if outlooks is None:
                outlooks = self._outlooks(now)
            for rid, entry in open_:
                made, length = outlooks.get(id(entry)) or self._rule_of_thumb(
                    server, line, now - entry.started, entry.produced, entry.max_new_tokens
                )
                to_go = max(0.0, length - made) * line[1]
                if to_go <= left:
                    continue
                servers = self.runner.servers
                to = soonest(servers, server, length, planner.room(), planner.price, to_go)
                if to is server or not self.runner.move_request(rid, to):
                    continue
                entry.expect = length  # what the cap counts it at there until it lands
                moved += 1
                self._say(server, to, now, (to_go, length), to.expected_s(length) or 0.0)
        return moved

    def _outlooks(self, now: float) -> dict[int, tuple[float, float]]:
        """(tokens made, expected length) of each request in flight (by its entry's id), as
        its dataset's budget reads it: its progress by its lane's latency line or its
        stream, its length by the survival estimate of the answers back and in flight."""
        found: dict[int, tuple[float, float]] = {}
        for ds in self.datasets:
            model = ds.model
            if not isinstance(model, SurvivalModel) or not ds.inflight:
                continue
            inflight = list(ds.inflight)
            made, law = read_inflight(inflight, model, now)
            for entry, done in zip(inflight, made, strict=True):
                length = min(float(entry.max_new_tokens), law.outlook(done)[0])
                found[id(entry)] = (done, max(done, length))
        return found

    @staticmethod
    def _rule_of_thumb(
        server: Server, line: tuple[float, float], age: float, streamed: int, cap: int
    ) -> tuple[float, float]:
        """(tokens made, expected length) of an answer running `age` seconds on `server`
        where its dataset has no survival estimate (`--budget-mode strict`): its progress
        by the lane's line, and past the lane's mean answer about as long again."""
        made = max(float(streamed), tokens_by(line, age))
        return made, max(made, min(float(cap), max(server.mean_answer, 2.0 * made)))

    def _say(
        self, server: Server, to: Server, now: float, late: tuple[float, float], takes: float
    ) -> None:
        """Count the move; say the first between two lanes in one line (a deadline's end
        may move many: the run's end says how many, `tally`)."""
        planner = self.planner
        key = (planner.lane_name(server), planner.lane_name(to))
        self.moved[key] += 1
        if self.moved[key] > 1 or planner.deadline_at is None:
            return
        left = planner.deadline_at - now
        self.reporter.event(
            "info",
            f"{max(0.0, left):.1f} s to the deadline: an answer on {key[0]} would land "
            f"{late[0] - left:.1f} s past it (about {late[1]:,.0f} tokens): sent again to "
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
