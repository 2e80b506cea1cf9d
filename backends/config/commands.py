"""What another thread may ask of a running engine, as values: stop, pause, a new budget.

Why values and not method names: the control panel used to send `("set_budget", ...)` and
the engine ran `getattr(engine, name)`, so neither a type checker nor a reader could see
who called what. A command is typed where it is made and matched once, in `Engine.apply`,
on the engine's own loop (`Engine.send` puts it there from any thread).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Stop:
    """The first: stop dispatching and drain; a second: abort what is in flight.

    With `dataset`: that dataset alone sends nothing more; its answers in flight finish and
    it ends as stopped, while the run's other datasets go on (issue 31, request 4).
    """

    dataset: str | None = None


@dataclass(frozen=True, slots=True)
class Pause:
    """Hold dispatch (`paused`) or release it; requests in flight carry on either way.

    With `dataset`: that dataset alone (the run's global pause still holds it too).
    """

    paused: bool
    dataset: str | None = None


@dataclass(frozen=True, slots=True)
class SetBudget:
    """A dataset's new budget; a dataset done at its old budget starts again."""

    dataset: str
    max_tokens: int | None
    max_samples: int | None


@dataclass(frozen=True, slots=True)
class SetPlanTarget:
    """A planned run's new deadline (as `--deadline` spells it; None: none) and spend cap
    (None: none): the plan is redone at once. `written_at`: when asked (Unix time)."""

    deadline: str | None
    max_cost: float | None
    written_at: float


EngineCommand = Stop | Pause | SetBudget | SetPlanTarget
