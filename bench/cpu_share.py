"""How much of the machine each process of a benchmark used: the client, its servers, a router.

A rate that misses its target on a small machine could be the machine's fault (the servers,
the router and the client share its cores) or the run's own. CPU seconds per process over a
run, divided by the run's wall time, say which: cores in use, by role, beside the cores there.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import psutil

Role = Callable[[psutil.Process], str]


def _cpu(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:  # gone since it was listed: its last reading stands
        return 0.0
    return times.user + times.system


class CpuShare:
    """Cores each role used between `start()` and `stop()`: this process is "client", each
    child is named by `role` (the same processes are read at both ends, so a child started
    in between is not counted)."""

    def __init__(self, role: Role) -> None:
        self.role = role
        self.cores: dict[str, float] = {}
        self._processes: list[tuple[str, psutil.Process, float]] = []
        self._started = 0.0

    def start(self) -> None:
        me = psutil.Process()
        children = me.children(recursive=True)
        self._processes = [("client", me, _cpu(me))]
        self._processes += [(self.role(child), child, _cpu(child)) for child in children]
        self._started = time.monotonic()

    def stop(self) -> dict[str, float]:
        """Cores used by each role since `start()` (1.0: one core all the time)."""
        wall = max(1e-9, time.monotonic() - self._started)
        self.cores = {}
        for role, process, before in self._processes:
            used = max(0.0, _cpu(process) - before) / wall
            self.cores[role] = self.cores.get(role, 0.0) + used
        return self.cores


def describe(cores: dict[str, float]) -> str:
    """`client 0.31, router 0.05, simulators 0.22 of 2 cores`."""
    parts = [f"{role} {used:.2f}" for role, used in sorted(cores.items())]
    return f"{', '.join(parts)} of {os.cpu_count()} cores"
