"""A streamed answer's length so far reaches the engine's in-flight entry as it arrives.

Precise mode reads `InFlight.produced` as a lower bound on an answer still in flight (a
censored observation); these tests hold a scripted stream between its frames and look at
the entry the engine keeps for it, in memory.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.clients.base import Progress, Request
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.clients.scripted import ScriptedClient, stream
from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineHooks
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.engine import Engine
from tests.support.polling import wait_until
from tests.support.records import recount

FRAMES = [40, 80, 120, 160]
TOKENS = 200


def one_prompt(tmp_path: Path) -> EngineConfig:
    return EngineConfig(
        datasets=[DatasetSpec("A", write_prompts(tmp_path / "A.jsonl", 1))],
        server_urls=["http://scripted"],
        tokenizer="",
        output_dir=tmp_path / "out",
        concurrency=1,
        sampling={"max_new_tokens": 1000},
        budget_mode=BudgetMode.PRECISE,
        snapshot_interval_s=0.01,
        hooks=EngineHooks(seed=1),
    )


def the_entry(engine: Engine) -> InFlight | None:
    """The engine's in-flight entry of its one request (None before it is sent and after).

    Read from the dataset's in-flight list, which is where the budget reads it."""
    inflight = engine._datasets[0].inflight
    return inflight[0] if inflight else None


async def test_produced_follows_the_stream_and_ends_at_the_answers_length(
    tmp_path: Path,
) -> None:
    gate: asyncio.Queue[None] = asyncio.Queue()

    async def script(url: str, request: Request, progress: Progress) -> Generation:
        return await stream(progress, TOKENS, FRAMES, gate.get)

    engine = Engine(one_prompt(tmp_path), client=ScriptedClient(script, stream=True))
    run = asyncio.create_task(engine.run())
    await wait_until(lambda: the_entry(engine) is not None, timeout=10)
    entry = the_entry(engine)
    assert entry is not None
    seen = []
    for count in FRAMES:  # held at each frame: the entry says that frame's count
        await wait_until(lambda count=count: entry.produced == count, timeout=10)
        seen.append(entry.produced)
        gate.put_nowait(None)
    final = await asyncio.wait_for(run, 10)
    assert seen == FRAMES
    assert entry.produced == TOKENS  # the last count it had is the answer's length
    assert the_entry(engine) is None
    assert recount(tmp_path / "out" / "A") == (final.datasets[0].tokens, 1) == (TOKENS, 1)


async def test_a_retried_request_counts_from_zero_again(tmp_path: Path) -> None:
    """A failed attempt's tokens are lost with it: the next attempt starts at 0, not at
    what the failed one had reached (the entry would claim tokens that never come)."""
    at_start: list[int] = []

    async def script(url: str, request: Request, progress: Progress) -> Generation:
        at_start.append(progress.produced)
        if len(at_start) == 1:
            progress.produced = 120
            raise RequestFailed("stream cut", retry=True)
        return await stream(progress, TOKENS, FRAMES, _yield)

    final = await asyncio.wait_for(
        Engine(one_prompt(tmp_path), client=ScriptedClient(script, stream=True)).run(), 20
    )
    assert at_start == [0, 0]
    assert final.datasets[0].tokens == TOKENS


async def _yield() -> None:
    await asyncio.sleep(0)
