"""What a host's status sentence says, for those who only read it (the dashboard, alerts).

A host link reports its state to people as one sentence ("connected", "disconnected: REASON
(retry in 4s)", "refused: ...", "failed: ..."). The parts code needs from it are read here,
beside the suffix the monitor writes, and nowhere else. Imported at start-up: stdlib only.
"""

from __future__ import annotations

RETRY = " (retry in "
"""Begins the reconnect countdown the monitor puts after a lost link's reason."""
LOST = ("disconnected", "failed", "refused", "stale")
"""How the statuses of a host that cannot be watched begin."""


def without_countdown(status: str) -> str:
    """`status` without its reconnect countdown: a new countdown is no new state."""
    return status.split(RETRY, 1)[0]


def is_lost(status: str) -> bool:
    """Whether `status` says the host cannot be watched now."""
    return status.startswith(LOST)
