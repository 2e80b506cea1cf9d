"""A dataset's state as the UI and progress.json see it: plain data, taken 4+ times a second."""

from __future__ import annotations

import os
import time

from gen_tui.backends.budget.rules import eta_seconds
from gen_tui.backends.config.run import EngineConfig
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.progress.plan_view import PlanView
from gen_tui.backends.progress.snapshot import DatasetSnapshot, producing_rates
from gen_tui.backends.store.conversations import Turns


def dataset_snapshot(
    ds: DatasetRun,
    config: EngineConfig,
    host: str,
    now_mono: float,
    now: float | None = None,
    plan: PlanView | None = None,
) -> DatasetSnapshot:
    """`ds` now: its tally, budget, rates, ETA and, when its answers are priced, its cost;
    `plan` is the run's fleet plan (the same for each of its datasets)."""
    tok_s, samples_s = producing_rates(ds.state, len(ds.inflight), ds.rates(now_mono))
    return DatasetSnapshot(
        name=ds.name,
        state=ds.state,
        tokens=ds.tokens,
        samples=ds.samples,
        max_tokens=ds.budget.max_tokens,
        max_samples=ds.budget.max_samples,
        budget_mode=str(config.budget_mode),
        inflight=len(ds.inflight),
        errors=ds.errors,
        malformed=ds.malformed,
        mean_tokens=ds.model.known_mean(),
        tok_s=tok_s,
        samples_s=samples_s,
        eta_s=None
        if ds.state.finished
        else eta_seconds(
            ds.budget,
            ds.tokens,
            ds.budget_samples,
            tok_s,
            samples_s,
            ds.prompts_left,
            ds.turns_mean if ds.per_conversation else 1.0,
        ),
        resumed_tokens=ds.resumed_tokens,
        resumed_samples=ds.resumed_samples,
        started_at=ds.started_at,
        updated_at=time.time() if now is None else now,
        last_record_at=ds.last_record_at,
        pid=os.getpid(),
        host=host,
        message=ds.message,
        truncated=ds.truncation.truncated,
        truncated_of=ds.samples,
        truncated_warn=config.truncated_warn,
        quality=ds.quality.published(),
        prompts_left=ds.prompts_left,
        budget_note=ds.budget_note,
        # The provider's words (ids, statuses), cleaned as a progress.json reader cleans
        # them: the hosted panel of a fleet run got them raw.
        batches=tuple(batch.shown() for batch in ds.batches),
        cost_saved=ds.cost_saved,
        conversations=ds.conversations_done if config.turns is Turns.ALL else None,
        turns_mean=ds.turns_mean if config.turns is Turns.ALL else None,
        plan=plan,
        lanes=dict(ds.lane_tokens),
        **CostMeter.fields(ds, now_mono),
    )
