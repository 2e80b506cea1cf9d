"""Precise mode ends near its budget, not far short of it, while prompts are left.

The engine in memory against a scripted client: the lengths are fixed, so the run is the
same every time. The case is the budget sweep's worst (B2-like lengths, concurrency 16,
a budget of one pool's volume, seed 2): the prior sized the first wave at one request,
its answer was long (15,797 tokens, four times the mean), and with one answer back the
dataset stopped for good 45K short of a 60K budget.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.clients.base import Request
from gen_tui.backends.clients.results import Generation
from gen_tui.backends.clients.scripted import ScriptedClient, answer
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import DatasetState
from tests.support.records import recount

BUDGET = 60_688
LONG_FIRST = 15_797
TYPICAL = [1015, 1364, 4591, 1661, 2322, 6120, 1834, 2949, 3310, 4395, 8830, 2480]
"""B2-like lengths after the long first one (mean 3,403)."""


async def test_a_long_first_answer_does_not_end_the_dataset_far_short(tmp_path: Path) -> None:
    lengths = itertools.chain([LONG_FIRST], itertools.cycle(TYPICAL))

    async def script(url: str, request: Request) -> Generation:
        await asyncio.sleep(0)
        return answer(next(lengths))

    config = EngineConfig(
        datasets=[DatasetSpec("B2", write_prompts(tmp_path / "B2.jsonl", 200), BUDGET)],
        server_urls=["http://scripted"],
        tokenizer="",
        output_dir=tmp_path / "out",
        concurrency=16,
        sampling={"max_new_tokens": 32_768},
        budget_mode=BudgetMode.PRECISE,
        snapshot_interval_s=0.01,
    )
    client = ScriptedClient(script)
    final = await asyncio.wait_for(Engine(config, client=client).run(), 60)
    (done,) = final.datasets
    assert done.state is DatasetState.DONE
    assert recount(tmp_path / "out" / "B2") == (done.tokens, done.samples)
    mean = done.tokens / done.samples
    # Within about two mean answers of the budget, on either side (the lone rule's bound).
    assert BUDGET - 2 * mean <= done.tokens <= BUDGET + 3 * mean, (done.tokens, done.samples)
    assert done.samples > 1
