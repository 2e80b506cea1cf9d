"""The scheduler and the engine's run loop in memory, against a scripted client.

No sockets and no tokenizer: the scripted client answers at once (or never, to test a
stop), so what these tests see is the engine's own scheduling.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import Budget, BudgetMode
from gen_tui.backends.clients import OpenAIClient, SGLangClient, client_for
from gen_tui.backends.clients.base import Request
from gen_tui.backends.clients.results import Generation
from gen_tui.backends.clients.scripted import ScriptedClient, answer
from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineError
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.engine import Engine
from gen_tui.backends.engine.allocator import Allocator
from gen_tui.backends.engine.context import RunContext
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.engine.scheduler import Scheduler
from gen_tui.backends.engine.signals import RunSignals
from gen_tui.backends.progress.snapshot import DatasetState, RunSnapshot
from gen_tui.backends.store.prompts import Prompt
from tests.support.engine import with_hooks
from tests.support.records import recount

URL = "http://scripted"


def config_for(tmp_path: Path, counts: dict[str, int], **overrides: object) -> EngineConfig:
    """A run over prompt files of `counts` prompts each, in that order."""
    budgets: dict[str, tuple[int | None, int | None]] = overrides.pop("budgets", {})  # type: ignore[assignment]
    specs = []
    for name, count in counts.items():
        path = write_prompts(tmp_path / "prompts" / f"{name}.jsonl", count)
        specs.append(DatasetSpec(name, path, *budgets.get(name, (None, None))))
    options: dict[str, object] = {
        "datasets": specs,
        "server_urls": [URL],
        "tokenizer": "",
        "output_dir": tmp_path / "out",
        "concurrency": 4,
        "sampling": {"max_new_tokens": 100},
        "snapshot_interval_s": 0.01,
        "progress_interval_s": 0.05,
        "seed": 1,
    }
    options.update(overrides)
    return EngineConfig(**with_hooks(options))  # type: ignore[arg-type]


# the scheduler alone


def scheduler(
    tmp_path: Path, names: str, **overrides: object
) -> tuple[Scheduler, list[DatasetRun]]:
    config = EngineConfig(
        datasets=[DatasetSpec(n, tmp_path / f"{n}.jsonl") for n in names],
        server_urls=[URL],
        tokenizer="",
        output_dir=tmp_path,
        sampling={"max_new_tokens": 100},
        **overrides,  # type: ignore[arg-type]
    )
    runs = [DatasetRun(spec, tmp_path / spec.name, 100.0) for spec in config.datasets]
    for ds in runs:
        ds.state = DatasetState.WAITING
        ds.queue = asyncio.Queue()
    run = RunContext(config, runs, RunSignals(), Reporter(None, None, lambda: None))
    return Scheduler(run, Allocator(run, lambda ds: None)), runs


def queue_one(ds: DatasetRun) -> None:
    assert ds.queue is not None
    ds.queue.put_nowait((Prompt(f"{ds.name}-x", [{"role": "user", "content": "hi"}], 1), None))


def test_a_free_slot_goes_to_the_first_dataset_in_order_that_can_use_it(tmp_path: Path) -> None:
    sched, (a, b, c) = scheduler(tmp_path, "ABC")
    queue_one(b)
    queue_one(c)
    assert sched.pick() is b  # A has nothing ready
    queue_one(a)
    assert sched.pick() is a  # now it has: first in order wins
    a.budget = Budget(max_samples=1)
    a.samples = 1
    assert sched.pick() is b  # A is at its budget: settled, and passed over
    assert a.state is DatasetState.DONE


def test_parallel_datasets_offer_the_slot_to_the_least_served_first(tmp_path: Path) -> None:
    sched, (a, b, c) = scheduler(tmp_path, "ABC", parallel_datasets=2)
    for ds in (a, b, c):
        queue_one(ds)
    a.inflight = [InFlight(0.0, 100), InFlight(0.0, 100)]
    b.inflight = [InFlight(0.0, 100)]
    assert sched.pick() is b
    b.inflight.append(InFlight(0.0, 100))
    b.inflight.append(InFlight(0.0, 100))
    assert sched.pick() is a  # C, third, only gets what the first two cannot use


def test_a_dataset_whose_budget_is_full_in_flight_passes_the_slot_on(tmp_path: Path) -> None:
    sched, (a, b) = scheduler(tmp_path, "AB", budget_mode=BudgetMode.STRICT)
    queue_one(a)
    queue_one(b)
    a.budget = Budget(250)
    a.inflight = [InFlight(0.0, 100), InFlight(0.0, 100)]  # 200 reserved, 100 more passes 250
    assert sched.pick() is b
    assert a.state is DatasetState.WAITING  # not finished: its answers are still to come


# whole runs against the scripted client


async def test_datasets_are_served_in_order_and_each_reaches_its_budget(tmp_path: Path) -> None:
    config = config_for(
        tmp_path, {"A": 50, "B": 50}, budgets={"A": (None, 10), "B": (None, 10)}, concurrency=2
    )
    client = ScriptedClient(lambda url, request: answer(20))
    engine = Engine(config, client=client)
    engine.set_paused(True)  # until both datasets have prompts ready: then order decides
    task = asyncio.create_task(engine.run())
    await asyncio.sleep(0.3)
    assert client.sent == []
    engine.set_paused(False)
    final = await asyncio.wait_for(task, 30)
    order = [request.dataset for _, request in client.sent]
    assert order == ["A"] * 10 + ["B"] * 10
    assert [(d.state, d.samples, d.tokens) for d in final.datasets] == [
        (DatasetState.DONE, 10, 200),
        (DatasetState.DONE, 10, 200),
    ]
    assert recount(tmp_path / "out" / "A") == (200, 10)
    assert all(request.input_ids is None for _, request in client.sent)  # messages only


async def test_strict_mode_never_passes_the_budget(tmp_path: Path) -> None:
    """Even with a server that answers past max_new_tokens: 130 tokens every time, of 100.

    Strict reserves 100 per request in flight, so several answers of 130 arrive together
    near the end; the ones that would pass the budget are dropped, never written.
    """
    rng = random.Random(7)
    config = config_for(
        tmp_path,
        {"A": 500},
        budgets={"A": (1000, None)},
        budget_mode=BudgetMode.STRICT,
        concurrency=8,
    )
    snapshots: list[RunSnapshot] = []
    events: list[str] = []

    async def script(url: str, request: Request) -> Generation:
        await asyncio.sleep(rng.uniform(0, 0.005))
        return answer(130)

    engine = Engine(
        config,
        on_snapshot=snapshots.append,
        on_event=lambda _level, text: events.append(text),
        client=ScriptedClient(script),
    )
    final = await asyncio.wait_for(engine.run(), 30)
    (done,) = final.datasets
    assert recount(tmp_path / "out" / "A") == (done.tokens, done.samples) == (910, 7)
    assert done.state is DatasetState.DONE
    assert max(s.datasets[0].tokens for s in snapshots) <= 1000
    assert any("would pass the strict budget" in text for text in events)


async def test_a_short_dataset_hands_its_share_of_the_total_on(tmp_path: Path) -> None:
    config = config_for(tmp_path, {"A": 5, "B": 1000}, max_total_tokens=10_000)
    client = ScriptedClient(lambda url, request: answer(50))
    final = await asyncio.wait_for(Engine(config, client=client).run(), 30)
    a, b = final.datasets
    assert (a.state, a.tokens) == (DatasetState.EXHAUSTED, 250)
    assert b.max_tokens == 10_000 - 250
    assert b.state is DatasetState.DONE
    assert 9_750 <= b.tokens < 9_750 + config.concurrency * 50


async def never_answer(url: str, request: Request) -> Generation:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


@pytest.mark.parametrize("can_abort", [True, False])
async def test_abort_is_sent_only_to_a_client_that_can_abort(
    tmp_path: Path, can_abort: bool
) -> None:
    config = config_for(tmp_path, {"A": 20}, concurrency=3, grace_s=30.0)
    client = ScriptedClient(never_answer, can_abort=can_abort)
    engine = Engine(config, client=client)
    task = asyncio.create_task(engine.run())
    for _ in range(500):
        if len(client.sent) == 3:
            break
        await asyncio.sleep(0.01)
    assert len(client.sent) == 3
    engine.request_stop()
    engine.request_stop()  # the second stop aborts what is in flight
    final = await asyncio.wait_for(task, 10)
    assert engine.aborted
    sent = sorted((url, request.rid) for url, request in client.sent)
    assert sorted(client.aborted) == (sent if can_abort else [])
    assert final.datasets[0].samples == 0 and final.datasets[0].state is DatasetState.STOPPED


async def test_a_client_that_needs_ids_needs_a_tokenizer(tmp_path: Path) -> None:
    config = config_for(tmp_path, {"A": 1})
    client = ScriptedClient(lambda url, request: answer(1), needs_input_ids=True)
    with pytest.raises(EngineError, match="needs input ids"):
        await Engine(config, client=client).run()


async def test_an_unreachable_server_ends_the_run_before_it_starts(tmp_path: Path) -> None:
    config = config_for(tmp_path, {"A": 1})
    client = ScriptedClient(lambda url, request: answer(1), down={URL: "refused"})
    with pytest.raises(EngineError, match="no inference server reachable: refused"):
        await Engine(config, client=client).run()
    assert client.sent == []


def test_the_api_setting_picks_the_client_and_only_sglang_can_abort(tmp_path: Path) -> None:
    config = config_for(tmp_path, {"A": 1}, api="openai")
    assert isinstance(client_for(config), OpenAIClient)
    config.api = "sglang"
    assert isinstance(client_for(config), SGLangClient)
    assert SGLangClient.can_abort and SGLangClient.needs_input_ids
    assert not OpenAIClient.can_abort and not OpenAIClient.needs_input_ids
