"""What every part of a run shares: the config, the datasets, the signals, the reporter, and
the longest answer a request may get (run-time state, learnt from the servers at start).

Handed to each part once, as one object, so that adding a shared thing is one change here
and not a new parameter threaded through every constructor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gen_tui.backends.config.run import EngineConfig
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.report import Reporter
from gen_tui.backends.engine.signals import RunSignals
from gen_tui.backends.settings import DEFAULT_MAX_NEW_TOKENS


@dataclass(slots=True)
class AnswerLimit:
    """The longest answer any request of the run may get, as budgets reserve it: the user's
    `max_new_tokens`, else what the servers allow. Until the engine has asked them at start,
    the default of the config's; the engine sets it then, once, and the parts read it.

    Why not a field of the config: the config is what the run was asked to do; this is what
    the run learnt, and writing it into the config made the two indistinguishable."""

    tokens: int


@dataclass(frozen=True, slots=True)
class RunContext:
    config: EngineConfig
    datasets: list[DatasetRun]
    signals: RunSignals
    reporter: Reporter
    limit: AnswerLimit = field(default_factory=lambda: AnswerLimit(DEFAULT_MAX_NEW_TOKENS))


class RunPart:
    """A part of a run (scheduler, allocator, feeder, sink, runner): sees the shared context."""

    def __init__(self, run: RunContext) -> None:
        self.config = run.config
        self.datasets = run.datasets
        self.signals = run.signals
        self.reporter = run.reporter
        self.answer_limit = run.limit
