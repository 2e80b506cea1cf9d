"""Precise mode's top-up: `r` from 9.5M to 10M on a resumed B2, with 150 slots.

The budget rule played against a server of the simulator's own B2-like lengths in a small
event loop (each answer back after a fixed 50 ms and 2,000 tokens a second), so every
request in flight is censored at its age exactly as in a run. The target is issue 18's:
within one mean answer or 0.2% of the budget (whichever is larger) of it, either side.
"""

from __future__ import annotations

import heapq
import random

import pytest

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import Budget, BudgetMode, length_model, may_dispatch
from gen_tui.backends.sim.config import LengthProfile

CAP = 32_768
SLOTS = 150
MEAN = 3793.0
TOK_S = 2000.0


def top_up(mode: BudgetMode, seed: int) -> tuple[int, int]:
    """(final tokens, budget) of a dataset resumed at 95% of its budget, topped up to it."""
    rng = random.Random(seed)
    profile = LengthProfile(mean=MEAN)
    history = [min(CAP, profile.draw(rng)) for _ in range(2500)]  # about 9.5M tokens
    model = length_model(mode, CAP, history)
    tokens = sum(history)
    budget = Budget(round(tokens / 0.95))
    now = 0.0
    running: list[tuple[float, int, int, InFlight]] = []  # (back at, order, length, request)
    sent = 0
    while True:
        inflight = [request for *_, request in running]
        while len(running) < SLOTS and may_dispatch(
            mode, budget, tokens, 0, inflight, model, CAP, now
        ):
            length = min(CAP, profile.draw(rng))
            request = InFlight(now, CAP)
            heapq.heappush(running, (now + 0.05 + length / TOK_S, sent, length, request))
            inflight.append(request)
            sent += 1
        if not running:
            assert budget.max_tokens is not None
            return tokens, budget.max_tokens
        now, _, length, request = heapq.heappop(running)
        tokens += length
        model.observe(length, now - request.started)


@pytest.mark.parametrize("seed", range(8))
def test_a_precise_top_up_of_five_percent_ends_within_the_allowance(seed: int) -> None:
    tokens, budget = top_up(BudgetMode.PRECISE, seed)
    allowed = max(MEAN, 0.002 * budget)
    assert budget - allowed <= tokens <= budget + allowed, (tokens - budget, allowed)


def test_drain_overshoots_the_same_top_up_by_most_of_a_pool() -> None:
    """What the rule above saves: drain sends 150 at once and every one lands past."""
    tokens, budget = top_up(BudgetMode.DRAIN, 0)
    assert tokens - budget > 0.002 * budget + 50 * MEAN
