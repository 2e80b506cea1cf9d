"""When a host's monitor last finished a survey, for the tests that wait for a fresh look at
a host (after a fault heals, after a process appears). The product acts on what a survey
found, never on when, so the clock is the tests' own: it wraps the monitor's `refresh`,
which its loop and its look after a kill or a start both call.
"""

from __future__ import annotations

import time

from gen_tui.backends.hosts import Survey
from gen_tui.backends.hosts.monitor import HostMonitor


class SurveyClock:
    """`at`: the wall time (time.time()) the monitor's last survey ended; 0.0 before one."""

    def __init__(self, monitor: HostMonitor) -> None:
        self.at = 0.0
        refresh = monitor.refresh

        async def timed() -> Survey:
            survey = await refresh()
            self.at = time.time()
            return survey

        monitor.refresh = timed  # type: ignore[method-assign]
