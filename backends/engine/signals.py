"""The flags and events every part of a run reads: stop, pause, credits, room on disk.

Kept in one object so the scheduler, the request runner and the sink see one truth, and a
stop reaches every wait at once.
"""

from __future__ import annotations

import asyncio


class RunSignals:
    """Run-wide switches; all of them are touched on the engine's loop only."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()
        """Set when a slot may have something to do: the dispatcher looks again."""
        self.stopping = False
        self.aborting = False
        self.paused = False
        self.credits = asyncio.Event()
        """Clear while the API says the account is out of credits: dispatch waits."""
        self.credits.set()
        self.space = asyncio.Event()
        """Clear while the disk is full: dispatch waits, and the answers in hand retry."""
        self.space.set()
        self.retry_now = asyncio.Event()
        """Set (then replaced) when one held answer got in, so the others try at once."""

    def request_stop(self) -> None:
        """First call: stop dispatching and drain. Second call: abort in-flight requests."""
        if self.stopping:
            self.aborting = True
        self.stopping = True
        self.credits.set()
        self.space.set()
        self.retry_now.set()  # answers waiting for room try once more, then give up
        self.wake.set()

    def retry_held(self) -> None:
        """Room for one answer may be room for all: wake every held answer now."""
        self.retry_now.set()
        self.retry_now = asyncio.Event()
