"""The slot pool: the requests in flight, how many may be (AIMD), and how busy it was.

`concurrency` is the cap the user gave; `limit` is what the servers are let have right now:
halved on a rate limit (at most once a second), grown back by about one slot per `limit`
successes. Utilisation is busy slot-seconds over the slot-seconds the cap offered.
"""

from __future__ import annotations

import asyncio
import time


class SlotPool:
    """Tasks in flight, by dataset name, and the accounting of the slots they hold."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.tasks: dict[asyncio.Task[None], str] = {}
        self.limit = float(concurrency)
        self._last_cut = 0.0
        self._busy_slot_seconds = 0.0
        self._last_busy_mark = time.monotonic()
        self._first_dispatch: float | None = None
        self._last_idle: float | None = None

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def free(self) -> bool:
        """Whether one more request may start under the current limit."""
        return len(self.tasks) < int(self.limit)

    def add(self, task: asyncio.Task[None], name: str) -> None:
        if self._first_dispatch is None:
            self._first_dispatch = self._last_busy_mark = time.monotonic()
        self.tasks[task] = name

    def remove(self, task: asyncio.Task[None]) -> None:
        self.mark_busy()
        self.tasks.pop(task, None)

    def cut(self) -> bool:
        """Multiplicative decrease on a rate limit; False if one was made within a second."""
        now = time.monotonic()
        if now - self._last_cut <= 1.0:
            return False
        self._last_cut = now
        self.limit = max(1.0, self.limit / 2)
        return True

    def grow(self) -> None:
        """Additive increase: about one more slot per `limit` successes, up to the cap."""
        if self.limit < self.concurrency:
            self.limit = min(float(self.concurrency), self.limit + 1.0 / self.limit)

    def mark_busy(self) -> None:
        """Add the slot-seconds held since the last mark (call before the count changes)."""
        now = time.monotonic()
        self._busy_slot_seconds += len(self.tasks) * (now - self._last_busy_mark)
        self._last_busy_mark = now
        self._last_idle = None if self.tasks else (self._last_idle or now)

    def active_seconds(self) -> float:
        """Wall time from the first dispatch to the last completion (or now)."""
        if self._first_dispatch is None:
            return 0.0
        return (self._last_idle or time.monotonic()) - self._first_dispatch

    def utilisation(self) -> float:
        """Busy slot-seconds over available slot-seconds, first dispatch to last completion."""
        span = self.active_seconds()
        if span <= 0:
            return 0.0
        return min(1.0, self._busy_slot_seconds / (span * self.concurrency))
