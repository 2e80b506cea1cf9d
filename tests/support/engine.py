"""The engine in-process for the tests: a config over a prompt folder, and one whole run.

Shared by the engine, pool, OpenAI, prompt-cap and hostile-server tests, so every in-process
run is built and checked the same way.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineHooks
from gen_tui.backends.engine import Engine
from gen_tui.backends.progress.snapshot import BudgetEvent, DatasetState, RunSnapshot

HOOKS = frozenset(field.name for field in fields(EngineHooks))


def with_hooks(options: dict[str, Any]) -> dict[str, Any]:
    """`options` for EngineConfig, with the test hooks among them (seed, auto_start,
    gpu_telemetry, sim_dataset_header) gathered into its `hooks`."""
    hooks = {name: options.pop(name) for name in list(options) if name in HOOKS}
    return options | ({"hooks": EngineHooks(**hooks)} if hooks else {})


def make_config(
    tokenizer_dir: Path, prompts: Path, output: Path, urls: list[str], **overrides: Any
) -> EngineConfig:
    """An engine config over every prompt file in `prompts`, fast snapshots, a fixed seed;
    `budgets` maps a dataset to its (max_tokens, max_samples)."""
    budgets = overrides.pop("budgets", {})
    datasets = [
        DatasetSpec(path.stem, path, *budgets.get(path.stem, (None, None)))
        for path in sorted(prompts.glob("*.jsonl"))
    ]
    options: dict[str, Any] = {
        "datasets": datasets,
        "server_urls": urls,
        "tokenizer": str(tokenizer_dir),
        "output_dir": output,
        "concurrency": 32,
        "sampling": {"max_new_tokens": 2048},
        "snapshot_interval_s": 0.05,
        "progress_interval_s": 0.1,
        "seed": 1,
    }
    options.update(overrides)
    return EngineConfig(**with_hooks(options))


async def run(config: EngineConfig) -> tuple[RunSnapshot, list[tuple[str, str]], list[RunSnapshot]]:
    """Run the engine in-process; (final snapshot, events, every snapshot), after checking
    its budget events agree with the run (every engine test gets that check for free)."""
    events: list[tuple[str, str]] = []
    snapshots: list[RunSnapshot] = []
    budgets: list[BudgetEvent] = []
    engine = Engine(
        config,
        on_snapshot=snapshots.append,
        on_event=lambda *e: events.append(e),
        on_budget=budgets.append,
    )
    final = await engine.run()
    # The structured budget events agree with the run: one crossing and at most one finish
    # per budget the dataset had (a share raised by a hand-on is crossed again), each
    # crossing at or past its budget, and the last event the final state with the final count.
    for snap in final.datasets:
        mine = [e for e in budgets if e.dataset == snap.name]
        crossed = [e.max_tokens for e in mine if e.kind == "crossed"]
        assert len(set(crossed)) == len(crossed), crossed
        assert all(
            e.max_tokens is None or e.tokens >= e.max_tokens for e in mine if e.kind == "crossed"
        )
        finishes = [e for e in mine if e.kind in ("done", "exhausted")]
        assert len({e.max_tokens for e in finishes}) == len(finishes), finishes
        if finishes:
            assert mine[-1] is finishes[-1] and finishes[-1].tokens == snap.tokens
            assert finishes[-1].kind == ("done" if snap.state is DatasetState.DONE else "exhausted")
    events.extend(("budget-event", f"{e.dataset}: {e.kind} at {e.tokens}") for e in budgets)
    return final, events, snapshots


def notice_runner(folder: Path, urls: list[str], said: list[str]) -> Any:
    """The request side of a run sent straight to `urls` (no tokenizer, no requests sent),
    its events' texts appended to `said`: for the drain-notice tests (`watch_drains`)."""
    from gen_tui.backends.engine.context import RunContext
    from gen_tui.backends.engine.report import Reporter
    from gen_tui.backends.engine.runner import RequestRunner
    from gen_tui.backends.engine.signals import RunSignals

    config = EngineConfig(datasets=[DatasetSpec("A", folder / "A.jsonl")], server_urls=urls)
    reporter = Reporter(lambda _level, text: said.append(text), None, lambda: None, None)
    return RequestRunner(RunContext(config, [], RunSignals(), reporter), None, None, None, None)  # type: ignore[arg-type]
