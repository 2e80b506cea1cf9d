"""The total-budget allocator: `max_total_tokens` split into per-dataset token budgets.

A share is re-split whenever what a dataset will end at becomes known: at start, when one
runs out of prompts (`hand_on`), while one that has sent its last prompt gets its last
answers (`hand_on_early`), and when the user sets a budget mid-run (`set_budget`). Every
path goes through `rebalance` and `apply`, so a split is computed one way only; what it
is computed from (`settled_tokens`) is a pure function of the datasets' tallies.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gen_tui.backends.budget.rules import Budget, likely_end, room_for_one, share_total
from gen_tui.backends.config.run import DatasetSpec, EngineError
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.figures import counted
from gen_tui.backends.progress.snapshot import DatasetState


def settled_tokens(datasets: list[DatasetRun], now: float) -> dict[str, int]:
    """The datasets whose share is fixed, by name, with what they are taken to end at.

    A dataset out of prompts settles at its final count. One that has sent its last prompt
    but still has answers in flight settles, for now, at a high estimate of its end
    (`likely_end`), when that is below its share: the others get the rest at once and keep
    the slots full, instead of stopping at their first shares and leaving the pool to empty
    while its last answers run (for minutes on a real server). A budget the user set
    mid-run stays as set, and the others share what it leaves of the total.
    """
    settled: dict[str, int] = {}
    for ds in datasets:
        if ds.state is DatasetState.EXHAUSTED:
            settled[ds.name] = ds.tokens
        elif ds.pinned and ds.budget.max_tokens is not None:
            settled[ds.name] = ds.budget.max_tokens
        elif ds.all_sent and ds.inflight and not ds.state.finished:
            end = likely_end(ds.tokens, ds.inflight, ds.model, now)
            if ds.budget.max_tokens is not None and end < ds.budget.max_tokens:
                settled[ds.name] = end
    return settled


class Allocator(RunPart):
    """Owns every change to a dataset's budget; `reopen` restarts a dataset done at its old
    budget (its prompt feed), which is the feeder's business, not the allocator's."""

    def __init__(self, run: RunContext, reopen: Callable[[DatasetRun], None]) -> None:
        super().__init__(run)
        self.reopen = reopen

    def set_budget(self, name: str, max_tokens: int | None, max_samples: int | None) -> None:
        """Change a dataset's budget mid-run; a dataset done at its old budget starts again."""
        for ds in self.datasets:
            if ds.name == name:
                ds.spec = DatasetSpec(
                    name, ds.spec.prompts, max_tokens, max_samples, ds.spec.weight
                )
                max_tokens, max_samples = ds.spec.max_tokens, ds.spec.max_samples  # whole
                ds.pinned = max_tokens is not None
                self.apply(ds, Budget(max_tokens, max_samples))
                self.rebalance()
                tokens = counted(max_tokens, "token") if max_tokens is not None else "no token cap"
                samples = f", {counted(max_samples, 'sample')}" if max_samples is not None else ""
                self.reporter.event("info", f"{name}: budget set to {tokens}{samples}")
                return
        raise EngineError(f"unknown dataset {name!r}")

    def has_room(self, ds: DatasetRun, budget: Budget, *, share: bool) -> bool:
        """Whether `ds` may do more under `budget`.

        For a new share of the total (`share`), room means room for one more answer: the
        shares move by small steps while a dataset's last answers arrive, and one woken
        for less than an answer would only overshoot. A budget the user sets is followed
        as given.
        """
        if not share:
            return not budget.reached(ds.tokens, ds.budget_samples)
        return room_for_one(
            self.config.budget_mode,
            budget,
            ds.tokens,
            ds.samples,
            ds.model,
            self.answer_limit.tokens,
        )

    def apply(self, ds: DatasetRun, budget: Budget, *, share: bool = False) -> None:
        """Set a budget; a dataset done at its old one starts again if it now has room."""
        ds.budget = budget
        if ds.state is DatasetState.DONE and self.has_room(ds, budget, share=share):
            self.reopen(ds)
            ds.state = DatasetState.WAITING
            ds.message = ""
        self.signals.wake.set()

    def rebalance(self) -> None:
        """Re-split `max_total_tokens` over the datasets not settled (see `settled_tokens`)."""
        total = self.config.max_total_tokens
        if total is None:
            return
        settled = settled_tokens(self.datasets, time.monotonic())
        shares = share_total(
            total,
            {ds.name: ds.spec.weight for ds in self.datasets},
            {ds.name: ds.spec.max_tokens for ds in self.datasets},
            settled,
        )
        for ds in self.datasets:
            if ds.name not in settled and ds.budget.max_tokens != shares[ds.name]:
                self.apply(ds, Budget(shares[ds.name], ds.spec.max_samples), share=True)

    def hand_on_early(self, ds: DatasetRun) -> None:
        """Re-split the total whenever a dataset that has sent its last prompt gets an answer."""
        if self.config.max_total_tokens is None or not ds.all_sent or not ds.inflight:
            return
        key = (ds.tokens, len(ds.inflight))
        if key != ds.outlook_key:
            ds.outlook_key = key
            self.rebalance()

    def hand_on(self, short: DatasetRun) -> None:
        """Give the rest of an exhausted dataset's share to the others, and say so."""
        share = short.budget.max_tokens
        self.rebalance()
        if self.config.max_total_tokens is None or share is None or short.tokens >= share:
            return
        takers = [
            f"{ds.name} {ds.budget.max_tokens:,}"
            for ds in self.datasets
            if ds.state is not DatasetState.EXHAUSTED and ds.budget.max_tokens is not None
        ]
        self.reporter.event(
            "info",
            f"{short.name}: {share - short.tokens:,} tokens of its {share:,} share unused; "
            f"the total's shares are now {', '.join(takers) or 'none left to take it'}",
        )
