"""The deadline's watch over a fleet's free box (issue 34, backends/engine/overtime.py): an
answer running there that its lane's pace says lands past the deadline is called off and
sent again to the lane that delivers it whole sooner, within the cap; one that lands in
time, one on a priced lane and one no lane delivers sooner stay. And the seam it acts
through (backends/engine/moves.py): one attempt alive at a time, its slot on the new lane
given back when the answer came first or the request was cancelled."""

from __future__ import annotations

import asyncio
import math
import random
import time
from pathlib import Path

import pytest

from gen_tui.backends.budget.lengths import InFlight, LatencyLine
from gen_tui.backends.clients.results import Generation
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine.context import RunContext
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.fleet import FleetPlanner
from gen_tui.backends.engine.moves import Moves
from gen_tui.backends.engine.overtime import OvertimeWatch
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.engine.runner import RequestRunner, Server
from gen_tui.backends.engine.signals import RunSignals
from gen_tui.backends.plan import Lane, plan

BOX, API = "http://box:1", "http://api:1"
PRICE = 10e-6


def watch(
    tmp_path: Path, max_cost: float | None = 1.0, datasets: list[DatasetRun] | None = None
) -> tuple[OvertimeWatch, FleetPlanner, Server, Server, list[str]]:
    """A watch over a slow free box (50 tok/s a request, 0.1 s before its first token,
    answers of a mean of 50) and a fast priced API (0.25 s an answer of 50 tokens)."""
    config = EngineConfig(
        datasets=[DatasetSpec("A", tmp_path / "A.jsonl", max_tokens=20_000)],
        lanes=[f"box={BOX}", f"api={API},api=openai,concurrency=16,price=0/10"],
        deadline="20s",
        max_cost=max_cost,
    )
    said: list[str] = []
    reporter = Reporter(lambda _level, text: said.append(text), None, lambda: None, None)
    run = RunContext(config, datasets or [], RunSignals(), reporter)
    runner = RequestRunner(run, None, None, None, None)  # type: ignore[arg-type]
    box, api = runner.servers
    for length in (20, 30, 40, 50, 50, 60, 70, 80, 100):
        box.answered(length, 0.1 + length / 50, 0.0)
        api.answered(length, 0.05 + length / 250, length * PRICE)
    planner = FleetPlanner(run, runner, CostMeter(config, []))
    lanes = [Lane("box", 200.0, 0.0, 1.0), Lane("api", 3_200.0, PRICE, 0.25)]
    planner.current = plan(lanes, 20_000, 20.0, max_cost)
    return OvertimeWatch(run, planner, runner), planner, box, api, said


async def running(
    watcher: OvertimeWatch, server: Server, rid: str, age: float, cap: int = 1_000
) -> InFlight:
    """A request on `server` for `age` seconds, open to a move."""
    entry = InFlight(time.monotonic() - age, cap)
    server.flying[rid] = entry
    server.outstanding += 1
    watcher.runner.moves.open(rid)
    return entry


async def test_an_answer_that_would_land_past_the_deadline_moves_to_the_faster_lane(
    tmp_path: Path,
) -> None:
    watcher, planner, box, api, said = watch(tmp_path)
    now = time.monotonic()
    planner.deadline_at = now + 3.0
    # 4 s in at 50 tok/s: about 195 tokens, past the mean, so about as many to go: 3.9 s.
    await running(watcher, box, "long", 4.0)
    # 1 s in: about 45 tokens, so about as many to go: 0.9 s, in time.
    await running(watcher, box, "short", 1.0)
    assert watcher.look(now) == 1
    assert "long" not in watcher.runner.moves and "short" in watcher.runner.moves
    assert (box.outstanding, api.outstanding) == (2, 1)  # its slot on the API taken now
    assert len(said) == 1 and "an answer on box would land" in said[0], said
    assert "sent again to api" in said[0] and "(about 390 tokens)" in said[0], said
    # Said once per pair of lanes, however many follow.
    await running(watcher, box, "long2", 4.0)
    assert watcher.look(now) == 1 and len(said) == 1
    assert watcher.tally() == (
        "moved near the deadline, as they would have landed past it: 2 answers from box to api"
    )


async def test_in_time_priced_capped_or_no_faster_lane_it_stays(tmp_path: Path) -> None:
    watcher, planner, box, api, said = watch(tmp_path)
    now = time.monotonic()
    await running(watcher, box, "long", 4.0)
    planner.deadline_at = now + 5.0  # it lands in 3.9 s: in time
    assert watcher.look(now) == 0
    planner.deadline_at = now + 3.0
    await running(watcher, api, "on-the-api", 30.0)  # a priced lane's: never moved
    watcher.runner.moves.close("long")  # ended, or moved already
    assert watcher.look(now) == 0
    watcher.runner.moves.open("long")
    planner.max_cost = planner.committed() + 390 * PRICE / 2  # the cap cannot pay for it
    assert watcher.look(now) == 0
    planner.max_cost = None
    api.limit = api.outstanding  # no free slot there
    assert watcher.look(now) == 0
    api.limit = None
    planner.deadline_at = None  # no deadline: nothing to keep
    assert watcher.look(now) == 0
    assert said == [] and box.outstanding == 1 and "long" in watcher.runner.moves
    assert watcher.tally() is None


def answer() -> Generation:
    return Generation([1], "x", 1, 1, "stop", 0.1)


async def test_a_moved_attempt_is_cancelled_and_its_answer_never_comes() -> None:
    moves: Moves[Server] = Moves()
    to = Server("http://api:1")
    moved = moves.open("r1")
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def attempt() -> Generation:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return answer()

    waiting = asyncio.create_task(moves.unless_moved(attempt(), moved))
    await started.wait()
    to.outstanding += 1  # the watch takes its slot, then moves it
    assert moves.move("r1", to) and not moves.move("r1", to)  # once
    assert await waiting is to  # the lane it goes to now, its slot still taken
    assert cancelled.is_set() and to.outstanding == 1


async def test_a_move_that_comes_with_the_answer_or_a_cancel_gives_its_slot_back() -> None:
    moves: Moves[Server] = Moves()
    to = Server("http://api:1")
    moved = moves.open("r1")

    async def quick() -> Generation:
        to.outstanding += 1
        moves.move("r1", to)  # the move lands as the answer does
        return answer()

    assert (await moves.unless_moved(quick(), moved)).text == "x"
    assert to.outstanding == 0
    moved = moves.open("r2")
    task = asyncio.create_task(moves.unless_moved(asyncio.sleep(60), moved))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    to.outstanding += 1
    moves.move("r2", to)
    task.cancel()  # the run stops as the move is made: the move is not made
    with pytest.raises(asyncio.CancelledError):
        await task
    assert to.outstanding == 0


async def test_how_long_an_answer_has_to_go_is_its_datasets_survival_estimate(
    tmp_path: Path,
) -> None:
    # Lengths of a mean of 600 with a cv of 0.95 (a lognormal), a box at 100 tok/s a
    # request: an answer 2,362 tokens in ends at about 4,270 by the budget's estimate (the
    # answers seen past it averaged 3,469; the estimate's tail is long on the safe side):
    # 19 s to go. Taken to run as long again (4,724: 24 s), it was moved 23 s before the
    # deadline, and the box's 24 s on it were lost.
    ds = DatasetRun(DatasetSpec("A", tmp_path / "A.jsonl"), tmp_path / "A", 32_767)
    rng, sigma = random.Random(5), math.sqrt(math.log1p(0.95**2))
    for _ in range(3_000):
        length = max(1, round(rng.lognormvariate(math.log(600) - sigma**2 / 2, sigma)))
        ds.model.observe(length, 0.1 + length / 100)
    watcher, planner, box, api, said = watch(tmp_path, max_cost=None, datasets=[ds])
    api.request_s = api.tokens / 2_000  # an API at 2,000 tok/s a request: 1.6 s for it
    box.line = LatencyLine()
    for length in range(100, 1_000, 100):
        box.line.add(length, 0.1 + length / 100)
    entry = await running(watcher, box, "long", 0.1 + 2_362 / 100, cap=32_767)
    entry.line = box.line
    ds.inflight.append(entry)
    now = time.monotonic()
    planner.deadline_at = now + 21.0
    assert watcher.look(now) == 0
    planner.deadline_at = now + 15.0
    assert watcher.look(now) == 1
    expected = int(said[0].split("(about ")[1].split(" tokens")[0].replace(",", ""))
    assert 3_800 <= expected <= 4_500, said
