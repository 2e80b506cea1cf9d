"""Issue 29's property: no mode but drain passes its budget by more than max(0.2%, one mean
answer, the cap when fewer than 3 answers fit) at p95, and strict never passes it.

Predictive always sends one more when nothing is in flight (the crossing a user watches
for). Sent whole (`--crossing-answer whole`), that answer lands its length less the room
left, which no rule can bound below one answer's excess (on lognormal lengths of cv 0.95 it
passes one mean answer about one time in four): its p95 is over the bound, as before. Cut
(the default, budget/crossing.py: max_new_tokens = room + one mean answer), the whole
overshoot's p95 is within it. Everything before the last answer is held to the bound, and
in all but a few runs (at most 5%) predictive's crossing answer is the only one past the
budget: the one it sends alone, which the cut bounds.

The real Engine (scheduler, allocator, sink, records on disk) against a scripted server
under a virtual clock (bench/virtual_clock.py): lognormal lengths of any mean from 1 to
32k tokens under a cap, concurrency 1 to 512, budgets from one answer up (at most a few
hundred answers, so an example runs in well under a second), two datasets in one pool,
and resumes whose history's mean lies by up to 2x either way.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.virtual_clock import run_virtual
from gen_tui.backends.budget.crossing import CrossingAnswer
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.clients.base import Request
from gen_tui.backends.clients.results import Generation
from gen_tui.backends.clients.scripted import ScriptedClient
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.engine import Engine
from gen_tui.backends.sim.config import LengthProfile
from gen_tui.backends.store.records import RAW_FILE

Variant = tuple[BudgetMode, CrossingAnswer]
PREDICTIVE = (BudgetMode.PREDICTIVE, CrossingAnswer.CUT)
WHOLE = (BudgetMode.PREDICTIVE, CrossingAnswer.WHOLE)
STRICT = (BudgetMode.STRICT, CrossingAnswer.CUT)
PRECISE = (BudgetMode.PRECISE, CrossingAnswer.CUT)
VARIANTS: tuple[Variant, ...] = (PREDICTIVE, WHOLE, STRICT, PRECISE)
"""Each mode at its default crossing answer (cut), and predictive's sent whole as well."""
SCRATCH = Path(tempfile.gettempdir()) / f"gen-tui-fuzz-first-wave-{os.getpid()}"
ratios: dict[Variant, list[float]] = {variant: [] for variant in VARIANTS}
"""Each run's overshoot as a share of its bound, by mode and crossing answer."""
before_last: dict[Variant, list[float]] = {variant: [] for variant in VARIANTS}
"""The same without the run's last answer: what it had passed the budget by before it."""
beside: dict[Variant, list[bool]] = {variant: [] for variant in VARIANTS}
"""Whether an answer before the last one had already passed the budget (not sent alone)."""


def write_history(folder: Path, lengths: list[int]) -> None:
    """A resumed dataset's record file: one record per length (the resume scan's shape)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / RAW_FILE).open("w") as out:
        for index, length in enumerate(lengths):
            out.write(json.dumps({"sample_id": f"h{index}", "completion_tokens": length}) + "\n")


async def one_run(
    variant: Variant,
    mean: float,
    cap: int,
    slots: int,
    answers: float,
    lie: float | None,
    seed: int,
) -> list[tuple[int, int, float, int]]:
    """(final tokens, budget, true mean, last answer's length) of each dataset of one run
    of two in one pool."""
    mode, crossing = variant
    root = SCRATCH / f"{mode.value}-{crossing.value}"
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(seed)
    profile = LengthProfile(mean=mean)
    true_mean = sum(min(cap, profile.draw(random.Random(i))) for i in range(400)) / 400
    before: dict[str, int] = {}
    specs = []
    for name in ("A", "B"):
        budget = max(1, round(answers * true_mean))
        if lie is not None:
            history = [max(1, min(cap, round(profile.draw(rng) * lie))) for _ in range(50)]
            write_history(root / "out" / name, history)
            before[name] = sum(history)
        prompts = write_prompts(root / f"{name}.jsonl", int(answers * 2) + 2 * slots + 120)
        specs.append(DatasetSpec(name, prompts, before.get(name, 0) + budget))

    async def script(url: str, request: Request) -> Generation:
        limit = request.max_new_tokens or cap  # the lone crossing answer's may be cut
        length = min(limit, profile.draw(rng))
        latency = 0.01 + length / 2000  # a client measures it: the model's clock
        await asyncio.sleep(latency)
        return Generation(None, "", 1, length, "stop" if length < limit else "length", latency)

    config = EngineConfig(
        datasets=specs,
        server_urls=["http://scripted"],
        output_dir=root / "out",
        concurrency=slots,
        sampling={"max_new_tokens": cap},
        budget_mode=mode,
        crossing_answer=crossing,
        snapshot_interval_s=10.0,
    )
    final = await Engine(config, client=ScriptedClient(script)).run()
    return [
        (
            ds.tokens - before.get(ds.name, 0),
            (ds.max_tokens or 0) - before.get(ds.name, 0),
            true_mean,
            last_answer(root / "out" / ds.name),
        )
        for ds in final.datasets
    ]


def last_answer(folder: Path) -> int:
    """The completion tokens of the last record a dataset wrote."""
    lines = (folder / RAW_FILE).read_text().splitlines()
    return int(json.loads(lines[-1])["completion_tokens"]) if lines else 0


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    mean=st.sampled_from([1.0, 20.0, 300.0, 3793.0, 32_000.0]),
    cap=st.sampled_from([64, 128, 4096, 32_768]),
    slots=st.sampled_from([1, 4, 16, 128, 512]),
    answers=st.sampled_from([1.0, 2.5, 10.0, 40.0, 200.0]),
    lie=st.sampled_from([None, None, 0.5, 2.0]),
    seed=st.integers(0, 1000),
)
# The issue's own case (4,000 tokens, a cap of 128, 128 slots), and two runs the mean of
# the answers back let through by 20 to 40 bounds before the crossing answer.
@example(mean=100.0, cap=128, slots=128, answers=40.0, lie=None, seed=1)
@example(mean=20.0, cap=4096, slots=128, answers=200.0, lie=0.5, seed=90)
@example(mean=3793.0, cap=4096, slots=512, answers=200.0, lie=None, seed=504)
def test_no_mode_but_drain_passes_its_budget_by_more_than_the_bound(
    mean: float, cap: int, slots: int, answers: float, lie: float | None, seed: int
) -> None:
    for variant in VARIANTS:
        mode = variant[0]
        for tokens, budget, true_mean, last in run_virtual(
            one_run(variant, mean, cap, slots, answers, lie, seed)
        ):
            if mode is BudgetMode.STRICT:
                assert tokens <= budget, (tokens, budget)
            bound = max(0.002 * budget, true_mean, cap if answers < 3 else 0)
            ratios[variant].append(max(0, tokens - budget) / bound)
            before_last[variant].append(max(0, tokens - last - budget) / bound)
            # Before its last answer no run passes the bound at all (1,800 runs: at most
            # 0.85 of it); the last answer is the crossing, measured at p95 below.
            assert tokens - last - budget <= bound, (mode, tokens, last, budget, bound)
            # Whether an answer beside the crossing one lands past the budget too: rare
            # (BENCHMARKS.md's crossing table: 4 of 240 sent beside others), so the cut of
            # the lone one is what the bound rests on; measured below.
            beside[variant].append(tokens - last > budget)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def test_the_95th_percentile_is_within_the_bound() -> None:
    """Runs after the property above (pytest keeps a module's order): each mode's 95th
    percentile of overshoot against its bound at most 1, predictive's with its lone crossing
    answer cut (the default); sent whole, as before the cut, it is not (see the module
    docstring)."""
    for variant in VARIANTS:
        assert ratios[variant], "the property test runs first"
    shown = {variant: round(p95(ratios[variant]), 2) for variant in VARIANTS}
    besides = {variant: sum(beside[variant]) for variant in (PREDICTIVE, WHOLE)}
    print(f"p95 in bounds: {shown}; runs {len(ratios[PREDICTIVE])}; beside: {besides}")
    print("highest, cut:", [round(r, 3) for r in sorted(ratios[PREDICTIVE])[-10:]])
    assert p95(ratios[PRECISE]) <= 1.0, shown
    assert p95(ratios[STRICT]) == 0.0
    assert p95(ratios[PREDICTIVE]) <= 1.0, (shown, sorted(ratios[PREDICTIVE])[-8:])
    # Whole, predictive's crossing answer keeps today's figures: 1.13 bounds at p95 over
    # these draws (BENCHMARKS.md), the excess of one uncut answer; 2 guards against a
    # return to the old rule's 3.1. Over 1 shows the cut is what brings the default in.
    assert 1.0 < p95(ratios[WHOLE]) <= 2.0, shown
    # The crossing answer goes alone in nearly every run: one of 126 (two datasets x 63
    # examples) had another answer past the budget before its last, cut or whole alike.
    for variant in (PREDICTIVE, WHOLE):
        assert sum(beside[variant]) <= 0.05 * len(beside[variant]), sum(beside[variant])
