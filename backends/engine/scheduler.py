"""The scheduler: which dataset a free slot goes to, and when a dataset is finished.

All selected datasets share one pool of slots. A free slot goes to the first dataset, in
priority (config) order, that has a prompt ready and whose budget allows one more request,
so the next dataset fills the slots the previous one leaves free as it tapers toward its
budget, and the server never idles between datasets.
"""

from __future__ import annotations

from collections.abc import Callable

from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import BudgetMode, may_dispatch
from gen_tui.backends.engine.allocator import Allocator
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.figures import counted
from gen_tui.backends.progress.snapshot import DatasetState


class Scheduler(RunPart):
    """Picks the dataset for the next request and settles those that can do no more."""

    def __init__(
        self,
        run: RunContext,
        allocator: Allocator,
        pool_limit: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(run)
        self.allocator = allocator
        self.pool_limit = pool_limit
        """How many slots the pool has right now (for the small-budget note)."""

    def may_send(self, ds: DatasetRun, inflight: list[InFlight]) -> bool:
        """Whether `ds`'s budget allows one more request beside `inflight`.

        With `--turns all` the request is a whole conversation: planned at the mean turns
        (`turns_mean`), but strict reserves the most turns of any conversation queued
        (`turns_max`), each at its cap: the next one may be the longest, and strict's
        promise is that the budget is never passed, which a conversation planned at the
        mean broke (it was either cut at the budget, a turn dropped, or not finished)."""
        mode = self.config.budget_mode
        return may_dispatch(
            mode,
            ds.budget,
            ds.tokens,
            ds.budget_samples,
            inflight,
            ds.model,
            self.answer_limit.tokens,
            expected=ds.expected,
            turns=ds.turns_max if mode is BudgetMode.STRICT else ds.turns_mean,
        )

    def note_small_budget(self, ds: DatasetRun) -> None:
        """Say once, when `ds`'s first wave stops short of the pool for its budget, that the
        budget is small for the pool: the slots it leaves idle are its budget's doing, not
        the server's. Said on the panel and in progress.json (`budget_note`) and as one
        event; never again for this dataset (a flood of warnings would hide it)."""
        if (
            ds.budget_noted
            or ds.budget_note
            or ds.expected.finished
            or ds.budget.max_tokens is None
        ):
            return
        slots = int(self.pool_limit()) if self.pool_limit is not None else None
        used = len(ds.inflight)
        if slots is None or used == 0 or used >= slots:
            return
        if self.config.budget_mode is BudgetMode.DRAIN:
            return
        left = max(0, ds.budget.max_tokens - ds.tokens)
        ds.budget_noted = True
        ds.budget_note = (
            f"{left:,} tokens is about {counted(ds.expected.answers_in(left), 'answer')}; "
            f"{used:,} of {slots:,} slots used"
        )
        self.reporter.event("info", f"{ds.name}: budget small for the pool: {ds.budget_note}")

    def withdraw_budget_note(self, ds: DatasetRun) -> None:
        """Take the note off the panel and progress.json once the budget lets `ds` fill the
        pool after all (called as it sends its request). The first wave is sized at
        the answers' cap (nothing is known of their lengths yet), so a budget of 400k
        tokens at a 32k cap "is about 12 answers" and leaves 4 of 16 slots idle until the
        first answers come back; at their real mean (580 tokens) it fills all 16 for the
        rest of the run, and a note still saying "12 answers" was wrong for all of it.
        The event log keeps what was said, and when."""
        if not ds.budget_note or not ds.budget_noted or self.pool_limit is None:
            return
        if len(ds.inflight) + 1 >= int(self.pool_limit()):
            ds.budget_note = ""

    def ended_short(self, ds: DatasetRun) -> bool:
        """Whether a resumed precise dataset had already stopped short of its budget (no room
        for one more): it is at its budget, and resuming must neither send nor announce it
        again. The other modes keep their own resume (strict settles once running)."""
        return (
            self.config.budget_mode is BudgetMode.PRECISE
            and ds.samples > 0
            and not self.may_send(ds, [])
        )

    def candidates(self) -> list[DatasetRun]:
        """Datasets in the order a free slot is offered to them.

        The first `parallel_datasets` unfinished ones share the pool, the least served
        first; every later one only gets slots those cannot use, in priority order.
        """
        live = [ds for ds in self.datasets if not ds.state.finished]
        front = self.config.parallel_datasets
        if front <= 1:
            return live
        return sorted(live[:front], key=lambda ds: len(ds.inflight)) + live[front:]

    def pick(self) -> DatasetRun | None:
        """The dataset the next free slot goes to, or None if none can use it now."""
        candidates = self.candidates()
        for ds in candidates:  # all of them, not only those before the pick: a dataset
            self.settle(ds)  # behind a busy one still finishes (and hands on) on time
            self.allocator.hand_on_early(ds)
        for ds in candidates:
            if ds.state.finished or ds.queue is None or (ds.queue.empty() and not ds.given_back):
                continue
            if ds.on_hold or ds.halted:  # paused or stopped alone
                continue
            if ds.begun_queued or self.may_send(ds, ds.inflight):
                self.withdraw_budget_note(ds)
                return ds  # (a conversation begun on disk is finished whatever the budget)
            self.note_small_budget(ds)
        return None

    def settle(self, ds: DatasetRun) -> None:
        """Move a dataset that can make no more progress to its final state."""
        begun = ds.begun_queued or not ds.begun_read
        if ds.state.finished or ds.inflight or (begun and not ds.halted):
            return  # (--turns all: conversations begun on disk are still to finish)
        if ds.halted:  # stopped alone, and drained: it ends here, the others go on
            ds.state = DatasetState.STOPPED
            ds.message = (
                f"stopped alone at {counted(ds.tokens, 'token')}, {counted(ds.samples, 'sample')}"
            )
            self.reporter.event("info", f"{ds.name}: {ds.message}")
            self.allocator.hand_on(ds)
            return
        short = False
        if ds.reached:
            ds.state = DatasetState.DONE
            ds.message = (
                f"budget reached: {counted(ds.tokens, 'token')}, {counted(ds.samples, 'sample')}"
            )
        elif ds.all_sent:  # before "no room": what it leaves of a share goes to the others
            ds.state = DatasetState.EXHAUSTED
            ds.message = (
                f"all prompts done: {counted(ds.tokens, 'token')}, {counted(ds.samples, 'sample')}"
            )
            self.reporter.event("budget", f"{ds.name}: {ds.message}")
            self.reporter.budget(ds, "exhausted")
            self.allocator.hand_on(ds)
            return
        elif not self.may_send(ds, []):
            # Strict or precise: the next answer would likely pass the budget (strict: could).
            ds.state = DatasetState.DONE
            mode = self.config.budget_mode
            ds.message = f"budget reached: {ds.tokens:,} tokens ({mode}: no room for one more)"
            short = True
        else:
            return
        self.reporter.event("budget", f"{ds.name}: {ds.message}")
        # A dataset that stops short (strict or precise) is where its user expects the
        # crossing's alert: it is as much the budget's moment, and no crossing will come.
        self.reporter.budget(ds, "done", short=short)
        if ds.outlook_key is not None:
            # Its end was handed on as an estimate; done at its share, it keeps all of it.
            self.allocator.rebalance()
