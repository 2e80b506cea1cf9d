"""Issue 29: the lone crossing answer is cut at the room left plus one mean answer.

Predictive and precise send their last answer alone, and one answer sent alone lands its
length less the room left: 2.6 to 2.9 mean answers past the budget at p95 on long-tailed
lengths. So that request's `max_new_tokens` is min(cap, room + one mean answer): the dataset
still crosses its budget, by at most a mean answer. `--crossing-answer whole` keeps today's
behaviour, strict and drain never cut, and a request sent beside others of its dataset keeps
its cap. These tests fail if the cut is not applied, applied to the wrong request, or its
record is not an ordinary capped one (finish_reason "length").
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.budget.crossing import CrossingAnswer, crossing_cap, one_mean_answer
from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import Budget, BudgetMode, Lengths, length_model, may_dispatch
from gen_tui.backends.clients.base import Request
from gen_tui.backends.clients.results import Generation
from gen_tui.backends.clients.scripted import ScriptedClient
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.engine import Engine
from gen_tui.backends.store.records import RAW_FILE
from tests.support.engine import with_hooks

CAP = 1000
CUT, WHOLE = CrossingAnswer.CUT, CrossingAnswer.WHOLE


def model_of(mode: BudgetMode, lengths: list[int]) -> Lengths:
    model = length_model(mode, CAP)
    for length in lengths:
        model.observe(length, None)
    return model


@pytest.mark.parametrize("mode", [BudgetMode.PREDICTIVE, BudgetMode.PRECISE])
def test_the_lone_crossing_answer_gets_the_room_plus_one_mean_answer(mode: BudgetMode) -> None:
    model = model_of(mode, [200] * 10)  # a mean of 200, no spread
    assert crossing_cap(CUT, mode, Budget(1500), 1000, [], model, CAP) == 500 + 200
    # Room enough that even a capped answer ends within a mean answer: the cap stands.
    assert crossing_cap(CUT, mode, Budget(5000), 1000, [], model, CAP) == CAP


@pytest.mark.parametrize("mode", [BudgetMode.PREDICTIVE, BudgetMode.PRECISE])
def test_an_answer_sent_alone_with_room_for_many_is_not_the_crossing_one(
    mode: BudgetMode,
) -> None:
    """Room under the cap but for many answers: the rule lets others out beside it, so it
    keeps the cap and does not hold them back (cut, nothing went beside it, and each answer
    after it went alone: 35 from 16,000 tokens of room at a mean of 600, cap 32,767)."""
    cap = 32_767
    model = length_model(mode, cap)
    for length in [300, 900] * 100:
        model.observe(length, None)
    budget = Budget(400_000)
    assert crossing_cap(CUT, mode, budget, 384_000, [], model, cap, 0.0) == cap
    assert may_dispatch(mode, budget, 384_000, 200, [InFlight(0.0, cap)], model, cap, 0.0)
    # With room for about one answer it is the crossing one, cut, and goes alone.
    cut = crossing_cap(CUT, mode, budget, 399_500, [], model, cap, 0.0)
    assert 500 < cut < 500 + 600
    alone = [InFlight(0.0, cut, crossing=True)]
    assert not may_dispatch(mode, budget, 399_500, 200, alone, model, cap, 0.0)


def test_before_any_answer_the_prior_is_the_mean_and_a_history_beats_it() -> None:
    fresh = length_model(BudgetMode.PREDICTIVE, CAP)
    assert crossing_cap(CUT, BudgetMode.PREDICTIVE, Budget(100), 0, [], fresh, CAP) == 100 + 512
    resumed = length_model(BudgetMode.PREDICTIVE, CAP, [50] * 4)
    assert crossing_cap(CUT, BudgetMode.PREDICTIVE, Budget(100), 0, [], resumed, CAP) == 150


def test_the_mean_answer_is_taken_low_by_its_own_uncertainty() -> None:
    """The bound is a mean answer of the lengths, not of the few back: two standard errors
    below the sample mean, the true one is very likely above the cut's excess."""
    few = model_of(BudgetMode.PREDICTIVE, [100, 300])  # mean 200, standard error 100
    assert one_mean_answer(few) == 1.0  # 200 - 2 x 100, at least a token
    assert crossing_cap(CUT, BudgetMode.PREDICTIVE, Budget(1500), 1000, [], few, CAP) == 501
    many = model_of(BudgetMode.PREDICTIVE, [100, 300] * 200)  # standard error about 5
    assert one_mean_answer(many) == pytest.approx(200 - 2 * 100 / 20, abs=0.2)
    assert one_mean_answer(model_of(BudgetMode.PREDICTIVE, [120])) == 1.0  # cv 1: 120 - 240


@pytest.mark.parametrize(
    ("policy", "mode", "inflight", "budget"),
    [
        (WHOLE, BudgetMode.PREDICTIVE, [], Budget(1500)),  # the user's choice
        (CUT, BudgetMode.STRICT, [], Budget(1500)),  # never crosses
        (CUT, BudgetMode.DRAIN, [], Budget(1500)),  # the seed's behaviour
        (CUT, BudgetMode.PREDICTIVE, [InFlight(0.0, CAP)], Budget(1500)),  # not alone
        (CUT, BudgetMode.PREDICTIVE, [], Budget(max_samples=5)),  # no token budget
    ],
)
def test_nothing_else_is_cut(
    policy: CrossingAnswer, mode: BudgetMode, inflight: list[InFlight], budget: Budget
) -> None:
    model = model_of(BudgetMode.PREDICTIVE, [100, 300])
    assert crossing_cap(policy, mode, budget, 1000, inflight, model, CAP) == CAP


async def one_at_a_time(
    tmp_path: Path, mode: BudgetMode, policy: CrossingAnswer
) -> tuple[int, list[tuple[str, Request]], list[dict[str, Any]], list[str]]:
    """A run of one slot (every answer alone) on a 1,500 budget: ten answers of 100 tokens,
    then every one would run to the cap. Returns (final tokens, requests sent, records,
    events)."""
    lengths = iter([100] * 10)

    async def script(url: str, request: Request) -> Generation:
        limit = request.max_new_tokens or CAP
        length = min(limit, next(lengths, CAP))
        await asyncio.sleep(0.001)
        return Generation(None, "x", 1, length, "stop" if length < limit else "length", 0.001)

    client = ScriptedClient(script)
    options: dict[str, object] = {
        "datasets": [DatasetSpec("A", write_prompts(tmp_path / "A.jsonl", 100), 1500)],
        "server_urls": ["http://scripted"],
        "tokenizer": "",
        "output_dir": tmp_path / "out",
        "concurrency": 1,
        "sampling": {"max_new_tokens": CAP},
        "budget_mode": mode,
        "crossing_answer": policy,
        "snapshot_interval_s": 0.01,
        "seed": 1,
    }
    events: list[str] = []
    engine = Engine(
        EngineConfig(**with_hooks(options)),  # type: ignore[arg-type]
        client=client,
        on_event=lambda _level, text: events.append(text),
    )
    final = await asyncio.wait_for(engine.run(), 60)
    raw = (tmp_path / "out" / "A" / RAW_FILE).read_text().splitlines()
    records = [json.loads(line) for line in raw]
    return final.datasets[0].tokens, client.sent, records, events


@pytest.mark.parametrize("mode", [BudgetMode.PREDICTIVE, BudgetMode.PRECISE])
async def test_a_run_crosses_by_one_mean_answer_with_one_answer_cut(
    tmp_path: Path, mode: BudgetMode
) -> None:
    tokens, sent, records, events = await one_at_a_time(tmp_path, mode, CUT)
    # 1,000 on disk, 500 of room, a mean of 100: the last goes with 600 and ends at it.
    assert sent[-1][1].max_new_tokens == 600
    assert tokens == 1500 + 100
    assert [record["completion_tokens"] for record in records][-1] == 600
    assert [record["finish_reason"] for record in records].count("length") == 1
    assert records[-1]["finish_reason"] == "length"
    said = [text for text in events if "answers sent alone now stop" in text]
    assert len(said) == 1, said


async def test_whole_sends_it_to_the_cap_as_before(tmp_path: Path) -> None:
    tokens, sent, _, events = await one_at_a_time(tmp_path, BudgetMode.PREDICTIVE, WHOLE)
    assert {request.max_new_tokens for _, request in sent} == {CAP}
    assert tokens == 1000 + CAP  # a whole answer past 500 of room: +500, five mean answers
    assert not [text for text in events if "answers sent alone" in text]


async def test_strict_never_cuts_and_never_crosses(tmp_path: Path) -> None:
    tokens, sent, _, _ = await one_at_a_time(tmp_path, BudgetMode.STRICT, CUT)
    assert {request.max_new_tokens for _, request in sent} == {CAP}
    assert tokens <= 1500


@pytest.mark.parametrize("mode", [BudgetMode.PREDICTIVE, BudgetMode.PRECISE])
def test_nothing_goes_beside_a_cut_crossing_answer(mode: BudgetMode) -> None:
    """Its cap says it adds little, so the rule would send more beside it, uncut: one ran
    long past the budget in the property test before this hold. Once it is back, the next
    goes with the new room."""
    model = model_of(mode, [100] * 50)
    budget = Budget(100_000)
    ordinary = [InFlight(0.0, CAP)]
    assert may_dispatch(mode, budget, 1000, 10, ordinary, model, CAP, 0.0)
    cut = [InFlight(0.0, CAP, crossing=True)]
    assert not may_dispatch(mode, budget, 1000, 10, cut, model, CAP, 0.0)
    assert may_dispatch(mode, budget, 1000, 10, [], model, CAP, 0.0)
