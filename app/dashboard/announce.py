"""Budget crossings and finishes, said once, whoever saw them.

The engine this process hosts reports crossings as data (`BudgetEvent`); a watched host's
are only seen in its records, as a count that passes its budget between two looks. Both end
up in :meth:`BudgetAnnouncer.crossed`, so the wording and the toast are the same.
"""

from __future__ import annotations

from collections.abc import Callable

from gen_tui.app.dashboard.rules import crossing_text
from gen_tui.backends.figures import counted
from gen_tui.backends.progress.snapshot import BudgetEvent, DatasetSnapshot, DatasetState

Toast = Callable[[str, str], None]
"""(text, title): a budget toast."""
Record = Callable[[str, str], None]
"""(level, text): a line in the events log."""


def short_text(tokens: int, budget: int) -> str:
    """What a dataset that stopped short of its budget (precise or strict: no room for one
    more answer) is said to have done: reached it, as a crossing would be."""
    return f"budget reached: {tokens:,} of {budget:,} tokens (no room for one more)"


class BudgetAnnouncer:
    """Says when a dataset crosses its budget, and its final count when it is done."""

    def __init__(self, toast: Toast, record: Record) -> None:
        self._toast = toast
        self._record = record
        self._crossed: dict[str, int | None] = {}
        self._seen: dict[str, int] = {}
        self._done: set[str] = set()

    def crossed(self, name: str, budget: int | None, tokens: int, where: str = "") -> None:
        """`name` is at or past its budget; `where`: the host it was seen on, if not here."""
        text = crossing_text(budget, tokens)
        if where:
            self._record("budget", f"{name} on {where}: {text}")
        self._toast(text, name)

    def engine(self, event: BudgetEvent) -> None:
        """A crossing or a finish as the hosted engine reports it."""
        name = event.dataset
        if event.kind == "crossed":
            self._crossed[name] = event.tokens
            self.crossed(name, event.max_tokens, event.tokens)
        elif self._crossed.pop(name, None) != event.tokens:
            # The final count, once the in-flight requests are in; not repeated when it is
            # the count the crossing already announced.
            budget = event.max_tokens
            if event.kind == "done" and budget is not None and event.tokens < budget:
                text = short_text(event.tokens, budget)  # stopped short: no crossing to see
            elif event.kind == "exhausted":
                text = (
                    f"all prompts done: {counted(event.tokens, 'token')}, "
                    f"{counted(event.samples, 'sample')}"
                )
            else:  # not "budget reached" again, with a second figure: what the drain added
                text = (
                    f"done: {counted(event.tokens, 'token')}, "
                    f"{counted(event.samples, 'sample')}, with the answers in flight at the "
                    "crossing"
                )
            self._toast(text, name)

    def watched(self, where: str, snap: DatasetSnapshot) -> None:
        """A watched dataset's latest count: a crossing if it passed its budget since the last.

        Announced once per budget, the first time its count is at or past it, and not for a
        dataset that was already past it when first seen.
        """
        name, budget = snap.name, snap.max_tokens
        if budget is None:
            return
        before = self._seen.get(name)
        was_done = name in self._done
        self._seen[name] = snap.tokens
        done = snap.state is DatasetState.DONE
        if done:
            self._done.add(name)
        else:
            self._done.discard(name)
        if before is not None and before < budget <= snap.tokens:
            self.crossed(name, budget, snap.tokens, where)
        elif done and not was_done and before is not None and snap.tokens < budget:
            # Precise mode may stop short, when the next answer would likely pass the budget
            # by more than one mean answer: no crossing to see, but it is done.
            text = short_text(snap.tokens, budget)
            self._record("budget", f"{name} on {where}: {text}")
            self._toast(text, name)
