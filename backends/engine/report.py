"""What a run tells people, and what ends it: events, budget events, the fatal reason.

The refusal streak lives here too: it is counted by the request runner and reset by the
sink, and when it is long enough it ends the run like any other fatal reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gen_tui.backends.alerts import REPEAT_S, AlertEvent
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.progress.snapshot import BudgetEvent

Event = Callable[[str, str], None]
Alert = Callable[[AlertEvent, str], None]
"""(event, message): something the user asked to be pinged about (`[alerts]`)."""

REFUSAL_STREAK = 20
"""Requests refused outright (4xx, not 429) in a row, with no success between, that end a run."""


class Reporter:
    """Sends (level, message) events and BudgetEvents to the engine's callbacks."""

    def __init__(
        self,
        on_event: Event | None,
        on_budget: Callable[[BudgetEvent], object] | None,
        stop: Callable[[], None],
        on_alert: Alert | None = None,
    ) -> None:
        self._on_event = on_event
        self._on_alert = on_alert
        self._alerted: dict[AlertEvent, float] = {}
        self._on_budget = on_budget
        self._stop = stop
        self.fatal: str | None = None
        self.refusals = 0

    def event(self, level: str, message: str) -> None:
        if self._on_event is not None:
            self._on_event(level, message)

    def alert(self, event: AlertEvent, message: str, repeat: bool = True) -> None:
        """Hand `message` to the alerts; with `repeat` False, at most once per REPEAT_S
        (a disk at the edge, or credits probed every minute, must not ping all night)."""
        if self._on_alert is None:
            return
        now = time.monotonic()
        if not repeat and now - self._alerted.get(event, -REPEAT_S) < REPEAT_S:
            return
        self._alerted[event] = now
        self._on_alert(event, message)

    def budget(self, ds: DatasetRun, kind: str, *, short: bool = False) -> None:
        """A BudgetEvent, and the budget alert for a crossing or a stop `short` of it (no
        room for one more: precise mode's end, as much the budget's moment as a crossing)."""
        if self._on_budget is not None:
            self._on_budget(BudgetEvent(ds.name, kind, ds.tokens, ds.samples, ds.budget.max_tokens))
        if kind == "crossed":
            self.alert(AlertEvent.BUDGET, f"{ds.name} reached its budget at {ds.tokens:,} tokens")
        elif short and ds.budget.max_tokens is not None:
            self.alert(
                AlertEvent.BUDGET,
                f"{ds.name} reached its budget: {ds.tokens:,} of {ds.budget.max_tokens:,} "
                "tokens (no room for one more)",
            )

    def fail(self, reason: str) -> None:
        """End the run for `reason` (said once, the first one wins): stop dispatching, drain,
        and raise it as the run's EngineError."""
        if self.fatal is None:
            self.fatal = reason
            self.event("error", reason)
            self.alert(AlertEvent.FAILED, reason)
            self._stop()

    def refused(self, refused: bool, reason: str) -> None:
        """Count a sample given up on; a long streak of outright refusals ends the run."""
        self.refusals = self.refusals + 1 if refused else 0
        if self.refusals >= REFUSAL_STREAK:
            # A wrong --model or sampling option is refused for every prompt alike: stop
            # instead of writing the whole dataset into errors.jsonl one 400 at a time.
            self.fail(
                f"the server refused {self.refusals} requests in a row ({reason}); "
                "check --model, the sampling options and the server URL. The refused samples "
                "are listed in errors.jsonl and are sent again on the next run"
            )
