"""What a panel shows for a dataset watched on a host: the watcher's totals and the writer's
progress.json, put together into the same :class:`DatasetSnapshot` an in-process run gives.

Counts always come from the records (a full recount, never what a writer claims: tokens,
samples and the answers cut at their cap, for a foreign script as for gen-tui); the rest
(state, in flight, errors, budget, cost, quality) comes from the writer's progress.json only
when it is the writer's own and fresh, so a stale file of a dead run never shows as live. A
pure function: the monitor supplies the totals, the writer it found and the rates it keeps.
"""

from __future__ import annotations

from typing import Any

from gen_tui.backends.budget.rules import Budget, eta_seconds
from gen_tui.backends.hosts import DatasetTotals, RunProcess
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, producing_rates
from gen_tui.backends.store.progress_file import DEFAULT_BUDGET_MODE, ProgressFile
from gen_tui.backends.untrusted import one_line


def watched_snapshot(
    totals: DatasetTotals,
    writer: RunProcess | None,
    rates: tuple[float, float],
    budget: tuple[int | None, int | None],
    host: str,
) -> DatasetSnapshot:
    """`totals`' dataset as a panel shows it: `writer` is the live run writing it (None:
    nobody), `rates` (tok/s, samples/s) from successive totals, `budget` (max tokens, max
    samples) from the writer's command line, overridden by what its progress.json says."""
    dataset = totals.dataset
    progress = totals.progress or ProgressFile()
    by_writer = writer is not None and progress.pid == writer.pid
    tok_s, samples_s = rates
    max_tokens, max_samples = budget
    if by_writer or writer is None:
        max_tokens = _or(progress.max_tokens, max_tokens)
        max_samples = _or(progress.max_samples, max_samples)
    if writer is None:
        state = _at_rest(totals, progress)
    elif by_writer and totals.progress_fresh:
        state = progress.state or DatasetState.ACTIVE
    else:
        state = DatasetState.ACTIVE
    # A writer stopped by a signal (SIGSTOP, ctrl+z: state T) is not a paused run: it
    # sends nothing, answers nothing and its progress.json goes stale. Shown "paused:
    # nothing sent" it read as a run at rest for good; as an active run it goes stale like
    # any run that writes nothing, saying why (issue 31, point 19). The engine's own pause
    # (`p`) is the state its fresh progress.json says.
    frozen = writer is not None and writer.state == "paused"
    tokens, samples = totals.tokens, totals.samples
    live = by_writer and totals.progress_fresh
    inflight = (progress.inflight or 0) if live else 0
    tok_s, samples_s = producing_rates(state, inflight, (tok_s, samples_s))
    counted, answers_per = _budget_count(samples, progress if by_writer else ProgressFile())
    return DatasetSnapshot(
        name=dataset,
        state=state,
        tokens=tokens,
        samples=samples,
        max_tokens=max_tokens,
        max_samples=max_samples,
        budget_mode=progress.budget_mode or DEFAULT_BUDGET_MODE,
        inflight=inflight,
        errors=(progress.errors or 0) if live else 0,
        malformed=totals.bad_lines,
        mean_tokens=tokens / samples if samples else None,
        tok_s=tok_s,
        samples_s=samples_s,
        eta_s=eta_seconds(
            Budget(max_tokens, max_samples),
            tokens,
            counted,
            tok_s,
            samples_s,
            progress.prompts_left if live else None,
            answers_per,
        )
        if writer is not None
        else None,
        resumed_tokens=0,
        resumed_samples=0,
        started_at=writer.identity.start_time if writer is not None else 0.0,
        updated_at=totals.received_at,
        last_record_at=totals.mtime,
        pid=writer.pid if writer is not None else progress.pid or 0,
        host=host,
        message=totals.problem
        or (_frozen_note(writer.pid) if frozen and writer is not None else "")
        or ((progress.message or "") if live else ""),
        cost=progress.cost if by_writer or writer is None else None,
        truncated=totals.truncated,
        truncated_of=samples,
        # Only a live writer's: a killed run's batches may still be open at the provider,
        # but its last counts and ETA would read as current.
        batches=(progress.batches or ()) if live else (),
        # A live writer's plan only: a dead run's would read as what is happening now.
        plan=progress.plan if live else None,
        **_writer_counts(progress if by_writer or writer is None else ProgressFile()),
    )


def _budget_count(samples: int, progress: ProgressFile) -> tuple[int, float]:
    """What `--max-samples` counts so far and how many answers (records, the unit of the
    samples/s rate) one of them takes. With `--turns all` (the writer says its
    conversations) a limit counts whole conversations, each of the writer's mean turns
    (older writers say no mean: the records per whole conversation stand in): counting
    turns against it put a remote run's ETA at a fraction of the time left. Else records."""
    done = progress.conversations
    if done is None:
        return samples, 1.0
    per = progress.turns_mean or (samples / done if done else 1.0)
    return done, max(1.0, per)


def _frozen_note(pid: int) -> str:
    return f"pid {pid} is stopped by a signal (state T): kill -CONT {pid} resumes it"


def _at_rest(totals: DatasetTotals, progress: ProgressFile) -> DatasetState:
    """The state of a dataset no live run writes: done or exhausted as its last writer said;
    "not started" when no run has left anything of it (no records file, lock or
    progress.json), since "stopped" would read as if something had been killed; else
    stopped."""
    if progress.state in (DatasetState.DONE, DatasetState.EXHAUSTED):
        return progress.state
    if totals.progress is None and not (totals.exists or totals.locked or totals.samples):
        return DatasetState.NOT_STARTED
    return DatasetState.STOPPED


def _writer_counts(progress: ProgressFile) -> dict[str, Any]:
    """What only the writer knows, as snapshot fields: its warning threshold for the cut
    share, the data-quality figures, the prompts left and its note on a small budget."""
    fields: dict[str, Any] = {}
    if progress.truncated_warn is not None:
        fields["truncated_warn"] = progress.truncated_warn
    if progress.quality is not None:
        fields["quality"] = progress.quality
    if progress.prompts_left is not None:
        fields["prompts_left"] = progress.prompts_left
    if progress.budget_note:
        fields["budget_note"] = one_line(progress.budget_note)
    if progress.cost_saved is not None:
        fields["cost_saved"] = progress.cost_saved
    if progress.conversations is not None and progress.conversations >= 0:
        fields["conversations"] = progress.conversations
    if progress.lanes:
        fields["lanes"] = progress.lanes
    return fields


def _or(value: int | None, default: int | None) -> int | None:
    return value if value is not None else default
