"""Where a panel's data comes from: one interface, so the dashboard's keys never ask which.

A dataset's panel is fed by one of: the engine this process hosts (`hosted.HostedRuns`), a
host link watching its records (`linked.HostLinks`), or anything else that implements
:class:`PanelSource`. The dashboard asks the source for the panel's view, and for what `k`
and `r` mean for that dataset: a :class:`Plan` (a refusal to say, a question to confirm, a
budget to ask for), which the screen carries out. Sources never touch widgets; they answer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from gen_tui.app.dialogs.modals import ResumeTarget
from gen_tui.backends.plan.control import PlanTarget
from gen_tui.backends.progress.plan_view import PlanView
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.store.tails import Peek
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.widgets.dataset_panel import PanelView

Action = Literal["kill", "resume"]
Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Note:
    """Something to tell the user (a toast), and nothing else to do."""

    text: str
    title: str = ""
    severity: Severity = "information"
    timeout: float | None = None
    """Seconds on screen; None: the app's default."""


Then = Callable[[], "Note | None"]


@dataclass(frozen=True)
class Confirm:
    """Ask before doing `then` (a kill, an abort): the confirmation dialog's wording."""

    title: str
    body: str
    label: str
    then: Then


@dataclass(frozen=True)
class AskBudget:
    """Ask for a new token budget for `target`, then do `then(budget)`."""

    target: ResumeTarget
    then: Callable[[int], Note | None]


@dataclass(frozen=True)
class AskTarget:
    """Ask for a planned run's new deadline and cap (`T`), from its plan `current` (the
    dialog previews the new plan), then do `then(target)`; `where` says which run."""

    current: PlanView
    where: str
    then: Callable[[PlanTarget], Note | None]


Plan = Note | Confirm | AskBudget | AskTarget

NO_PLAN = (
    "its run has no plan: a run plans over --lane servers or with --deadline "
    "(see docs/fleet.md), once every lane has answered"
)
"""What a key means for one dataset, decided by its source."""


@dataclass(frozen=True)
class Activity:
    """What the header says a source is doing, when it is doing something."""

    state: str
    names: Sequence[str]
    pools: Sequence[RunSnapshot]
    countdowns: Sequence[float] = ()
    watched_flight: WatchedFlight | None = None
    """Watched runs (no pool of this process): their pools and their servers' loads (None:
    no live writer says its pool)."""


@dataclass(frozen=True)
class WatchedFlight:
    """The pools of the runs of other processes that a panel watches, and their servers."""

    inflight: int
    concurrency: int
    """Requests in flight and their limits, summed once per run (each dataset's
    progress.json of a run carries the same pool)."""
    servers: tuple[ServerMetrics | None, ...] = ()
    """The load of each server those runs use, once per server of each host (as its
    watcher read it there, else as the run's writer said it); None: not known (down,
    stale, no /metrics). The header's "(server: ...)" beside the pools' in flight."""
    servers_down: int = 0
    """Those servers the runs' writers say are not ok (their engines' own health, as a
    hosted run's header counts them): the header's "N/M server(s) unreachable"."""


class PanelSource(ABC):
    """One place panels read from, and what `k` and `r` do for the datasets it feeds."""

    @property
    @abstractmethod
    def names(self) -> Sequence[str]:
        """The datasets it knows, in order: each gets a panel (they may grow, never shrink)."""

    @abstractmethod
    def view(self, name: str, now: float, wall: float) -> PanelView | None:
        """The panel of `name` at monotonic `now` (wall clock `wall`); None: not from here."""

    def claims(self, name: str, action: Action) -> bool:
        """Whether `action` on `name` is this source's to carry out (first claim wins)."""
        return False

    def kill(self, name: str, view: PanelView | None) -> Plan:
        """What `k` on `name` does."""
        return Note(f"{name}: cannot be stopped from here", severity="warning")

    def resume(self, name: str, view: PanelView) -> Plan:
        """What `r` on `name` does."""
        return Note(f"{name}: cannot be resumed from here", severity="warning")

    def plan_target(self, name: str, view: PanelView) -> Plan:
        """What `T` on `name` does (its run's deadline and cap)."""
        return Note(f"{name}: its run's plan cannot be changed from here", severity="warning")

    def activity(self, now: float) -> Activity | None:
        """What the header reports for this source, or None when it has nothing running."""
        return None

    def peek(self, name: str) -> Peek | None:
        """Where `name`'s records and log are read from; None: not this source's."""
        return None
