"""Issue 29: the first wave is sized by the budget, not by the pool, in every mode but drain.

A 4,000-token budget with 128 slots and answers capped at 128 tokens used to send all 128
at once (predictive ended +154%, precise +91%). The expected tokens in flight (each answer
not back at the prior: the cap, or the history) plus the tokens on disk never pass the
budget, from the very first request.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from gen_tui.backends.budget.expected import ExpectedLengths
from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import Budget, BudgetMode, length_model, may_dispatch
from gen_tui.backends.clients.base import Request
from gen_tui.backends.clients.results import Generation
from gen_tui.backends.clients.scripted import ScriptedClient, answer
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import RunSnapshot
from tests.support.engine import with_hooks

CAP = 128


def first_wave(mode: BudgetMode, budget: int, expected: ExpectedLengths) -> int:
    """How many requests go out before any answer is back."""
    model = length_model(mode, CAP)
    inflight: list[InFlight] = []
    while len(inflight) < 1000 and may_dispatch(
        mode, Budget(budget), 0, 0, inflight, model, CAP, 0.0, expected=expected
    ):
        inflight.append(InFlight(0.0, CAP))
    return len(inflight)


@pytest.mark.parametrize("mode", [BudgetMode.PREDICTIVE, BudgetMode.PRECISE, BudgetMode.STRICT])
def test_with_no_answer_back_every_answer_counts_at_its_cap(mode: BudgetMode) -> None:
    assert first_wave(mode, 4000, ExpectedLengths(CAP)) <= 4000 // CAP


def test_drain_keeps_its_pool_sized_wave() -> None:
    """Drain is the mode that does not keep budgets: what the others are measured against."""
    assert first_wave(BudgetMode.DRAIN, 4000, ExpectedLengths(CAP)) == 1000


def test_a_history_sets_the_prior_with_doubt_and_never_above_the_cap() -> None:
    assert ExpectedLengths(CAP, [10, 20, 30]).prior == 80.0  # 4 x its mean of 20
    assert ExpectedLengths(CAP, [100, 120]).prior == CAP
    resumed = ExpectedLengths(CAP, [10, 20, 30])
    assert resumed.allows(4000, 0, [InFlight(0.0, CAP)] * 49, CAP)  # 50 x 80 = 4,000
    assert not resumed.allows(4000, 0, [InFlight(0.0, CAP)] * 50, CAP)


def test_answers_back_count_at_their_lengths_and_those_in_flight_at_the_prior() -> None:
    expected = ExpectedLengths(CAP)
    for _ in range(10):
        expected.observe(20)  # ten short answers back first, 21 still running
    assert expected.mean(21) == pytest.approx((10 * 20 + 21 * CAP) / 31)
    # The short answers do not open the pool: 200 on disk, and the in-flight at that mean.
    inflight = [InFlight(0.0, CAP)] * 21
    allowed = expected.allows(4000, 200, inflight, CAP)
    assert allowed == (200 + 22 * expected.mean(22) <= 4000)
    assert not expected.allows(4000, 200, [InFlight(0.0, CAP)] * 40, CAP)
    for _ in range(1000):
        expected.observe(20)
    assert expected.mean(21) < 25  # and it ends at the run's own mean


def test_a_lone_request_is_the_modes_call() -> None:
    assert ExpectedLengths(CAP).allows(10, 0, [], CAP)


@pytest.mark.parametrize("mode", [BudgetMode.PREDICTIVE, BudgetMode.PRECISE, BudgetMode.STRICT])
async def test_a_small_budget_on_a_wide_pool_ends_near_it_and_says_so_once(
    tmp_path: Path, mode: BudgetMode
) -> None:
    rng = random.Random(3)
    most = 0
    client: ScriptedClient

    async def script(url: str, request: Request) -> Generation:
        nonlocal most
        if not done:  # the first wave: sent before any answer is back
            most = max(most, len(client.sent))
        length = min(CAP, max(1, round(rng.lognormvariate(4.3, 0.8))))
        await asyncio.sleep(length / 20_000)
        done.append(length)
        return answer(length)

    done: list[int] = []
    client = ScriptedClient(script)
    final, events, snapshots = await _run_a(tmp_path, client, 400, 4000, CAP, CAP, mode)
    (ds,) = final.datasets
    assert most <= 4000 // CAP
    assert ds.tokens <= 4000 + 2 * CAP
    notes = [text for text in events if "budget small for the pool" in text]
    assert len(notes) == 1, notes
    assert "4,000 tokens is about 31 answers" in notes[0]
    assert f"of {CAP} slots used" in notes[0]
    assert any(snap.datasets[0].budget_note for snap in snapshots)
    assert final.datasets[0].to_json()["budget_note"] == notes[0].split("pool: ")[1]


async def test_a_note_the_first_wave_made_is_withdrawn_once_the_pool_fills(
    tmp_path: Path,
) -> None:
    """40,000 tokens at a cap of 4,096 "is about 9 answers" (9 of 16 slots) before any
    answer is back; at their real length (about 100 tokens) the budget fills the 16 slots
    for the rest of the run: the panel's note goes, the event log keeps it."""
    most = 0
    client: ScriptedClient

    async def script(url: str, request: Request) -> Generation:
        nonlocal most
        most = max(most, len(client.sent) - len(done))
        await asyncio.sleep(0.005)
        done.append(100)
        return answer(100)

    done: list[int] = []
    client = ScriptedClient(script)
    final, events, snapshots = await _run_a(
        tmp_path, client, 800, 40_000, 16, 4096, BudgetMode.PRECISE
    )
    notes = [text for text in events if "budget small for the pool" in text]
    assert len(notes) == 1, notes
    assert "40,000 tokens is about 9 answers; 9 of 16 slots used" in notes[0]
    assert most == 16, "the budget filled the pool once the answers' length was known"
    shown = [snap.datasets[0].budget_note for snap in snapshots]
    assert shown[0] == "" or "about 9 answers" in shown[0]
    assert any(shown), "the note was on the panel while the first wave was short"
    gone = next((i for i, note in enumerate(shown) if i and not note and shown[i - 1]), None)
    assert gone is not None, "the note stayed on the panel with the pool full"
    assert not any(shown[gone:]), "withdrawn for good"
    assert final.datasets[0].budget_note == ""
    assert final.datasets[0].tokens <= 40_000


async def _run_a(
    tmp_path: Path,
    client: ScriptedClient,
    prompts: int,
    budget: int,
    pool: int,
    cap: int,
    mode: BudgetMode,
) -> tuple[RunSnapshot, list[str], list[RunSnapshot]]:
    """Dataset A (`prompts` prompts, `budget` tokens) through `client` on a pool of `pool`
    with answers capped at `cap`: (the final snapshot, the events said, every snapshot)."""
    options: dict[str, object] = {
        "datasets": [DatasetSpec("A", write_prompts(tmp_path / "A.jsonl", prompts), budget)],
        "server_urls": ["http://scripted"],
        "tokenizer": "",
        "output_dir": tmp_path / "out",
        "concurrency": pool,
        "sampling": {"max_new_tokens": cap},
        "budget_mode": mode,
        "snapshot_interval_s": 0.01,
        "seed": 1,
    }
    config = EngineConfig(**with_hooks(options))  # type: ignore[arg-type]
    events: list[str] = []
    snapshots: list[RunSnapshot] = []
    engine = Engine(
        config,
        client=client,
        on_event=lambda _level, text: events.append(text),
        on_snapshot=snapshots.append,
    )
    final = await asyncio.wait_for(engine.run(), 60)
    return final, events, snapshots


async def test_a_budget_of_about_one_answer_says_answer(tmp_path: Path) -> None:
    """6,000 tokens at a cap of 4,096 "is about 1 answer" (it said "1 answers")."""

    async def script(url: str, request: Request) -> Generation:
        await asyncio.sleep(0.005)
        return answer(100)

    _, events, _ = await _run_a(
        tmp_path, ScriptedClient(script), 200, 6_000, 16, 4096, BudgetMode.PREDICTIVE
    )
    notes = [text for text in events if "budget small for the pool" in text]
    assert len(notes) == 1 and "6,000 tokens is about 1 answer; 1 of 16 slots used" in notes[0]
