"""What every part of a run shares: the config, the datasets, the signals, the reporter.

Handed to each part once, as one object, so that adding a shared thing is one change here
and not a new parameter threaded through every constructor.
"""

from __future__ import annotations

from dataclasses import dataclass

from gen_tui.backends.config.run import EngineConfig
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.engine.signals import RunSignals


@dataclass(frozen=True, slots=True)
class RunContext:
    config: EngineConfig
    datasets: list[DatasetRun]
    signals: RunSignals
    reporter: Reporter


class RunPart:
    """A part of a run (scheduler, allocator, feeder, sink, runner): sees the shared context."""

    def __init__(self, run: RunContext) -> None:
        self.config = run.config
        self.datasets = run.datasets
        self.signals = run.signals
        self.reporter = run.reporter
