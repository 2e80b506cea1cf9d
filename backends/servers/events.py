"""What happens to a server, as typed events: the panel, the history, the alerts and the
headless `gen-tui servers up` subscribe to the same stream (the supervisor emits them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class ServerState(StrEnum):
    """Where a server is in its life, as the servers view and `gen-tui servers status` say."""

    STARTING = "starting"
    """Launched; its process (or job) is being checked."""
    LOADING = "loading"
    """Running, its health check not passed yet (loading weights)."""
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    """Running, failing its health check since `since`; restarted after `unhealthy_s`."""
    DRAINING = "draining"
    """Being stopped on purpose: off the router, its in-flight requests finishing."""
    EXITED = "exited"
    RESTARTING = "restarting"
    """Waiting out its backoff before the next start."""
    DOWN = "down"
    """Restarted too often this hour: left down (and alerted) until someone restarts it."""
    FAILED = "failed"
    """Never came up (a bad recipe): not restarted, the line says why."""
    STOPPED = "stopped"
    NOT_OURS = "not ours"
    """Something gen-tui did not start answers on the recipe's port: watched, never touched."""


@dataclass(frozen=True)
class ServerEvent:
    """One change of a server's state, with the line that explains it."""

    name: str
    state: ServerState
    at: float
    """Wall-clock time."""
    detail: str = ""
    ref: str | None = None
    """Its pid or job id, when it has one."""
    restarts: int = 0
    """Restarts in the last hour."""
    since: float | None = None
    """When the state began (an unhealthy server's first failed check)."""
    url: str = ""
    """Where it answers now (a Slurm job without an `address`: on its node)."""

    def line(self) -> str:
        """The event as one line: `server NAME STATE: detail`."""
        return f"server {self.name} {self.state}" + (f": {self.detail}" if self.detail else "")


EventSink = Callable[[ServerEvent], None]
