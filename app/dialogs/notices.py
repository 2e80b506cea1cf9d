"""Notices (toasts) a dialog hid: said again as it closes, if they went while it was open.

A dialog is 72 columns of an 80-column screen, so notices do not show over one (tui.tcss
hides their rack on the dialogs); Textual keeps them and shows those still current once
the dialog closes. One that timed out meanwhile was never seen: the resume dialog left open
for 10 s swallowed the 6 s "B9_stale: stopped" of a kill (issue 31, tried again). The
keeper remembers the last notices and, as the last dialog closes, gives back those that
were current while it was open and have gone since, to be shown again for their whole time.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from textual.notifications import SeverityLevel

KEPT = 20
"""The last notices remembered: more than a dialog ever hides."""


class HidesNotices:
    """A dialog over which notices are not drawn (see tui.tcss): the keeper's to watch."""


@dataclass(frozen=True)
class Notice:
    message: str
    title: str
    severity: SeverityLevel
    timeout: float
    raised_at: float

    @property
    def ends_at(self) -> float:
        return self.raised_at + self.timeout


class NoticeKeeper:
    """The last notices, and which of them a dialog hid until they timed out."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.recent: deque[Notice] = deque(maxlen=KEPT)
        self.opened_at: float | None = None
        """When the dialog now open (the first of a stack of them) opened; None: none is."""

    def noted(self, message: str, title: str, severity: SeverityLevel, timeout: float) -> None:
        self.recent.append(Notice(message, title, severity, timeout, self.clock()))

    def screen_changed(self, hides: bool) -> list[Notice]:
        """The screen on top changed (`hides`: it is a dialog that hides notices). Returns
        the notices to say again: on closing the last dialog, those current at any time
        while it was open that have timed out since (the others still show)."""
        if hides:
            if self.opened_at is None:
                self.opened_at = self.clock()
            return []
        opened, self.opened_at = self.opened_at, None
        if opened is None:
            return []
        now = self.clock()
        missed = [n for n in self.recent if opened < n.ends_at <= now]
        for notice in missed:
            self.recent.remove(notice)
        return missed
