"""The load behind an SGLang router: each worker's, their sum, and how many are healthy.

A router (`sglang-router` 0.3.2) serves no /metrics of its own on its URL (404; its
Prometheus port is a separate one a client is not told), so a run reads each worker's
/metrics, by the URLs the router lists in `GET /workers`, and shows the router as the sum.

Health has two sources, and a worker counts as healthy only when both agree: the router's
listing (`is_healthy`, from its own probes: every 60 s and 3 failures by default, so
minutes late) and the run's own read of the worker's /metrics a moment ago (a worker that
refuses the connection is down now, whatever the router still says). The router's `/health`
says nothing of its workers: it answers 200 "OK" with every worker gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gen_tui.backends import watcher
from gen_tui.backends.telemetry.metrics import ServerMetrics

__all__ = ["MAX_WORKERS_READ", "OK", "WorkerLoad", "healthy_count", "summed", "workers_from_json"]

MAX_WORKERS_READ = watcher.MAX_ROUTER_WORKERS
"""The most workers of one router whose /metrics a run reads (and a progress.json reader
takes): a router over more is shown by its first ones and the sum of those."""
OK = "ok"
"""A worker's state when its /metrics answered (with metrics or a 404)."""
STATE_CHARS = 300
"""The most of a worker's state kept from a progress.json (a reason, one line)."""


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """One worker behind a router, as a run last read it."""

    url: str
    healthy: bool = True
    """Whether the router lists it healthy."""
    state: str = OK
    """OK, or why its /metrics could not be read ("down: ..." when it does not answer)."""
    metrics: ServerMetrics | None = None
    """Its load; None when it serves no /metrics or could not be read."""

    @property
    def up(self) -> bool:
        """Healthy by both sources: the router lists it so and it answered the last read."""
        return self.healthy and self.state == OK

    def to_json(self) -> dict[str, Any]:
        """How progress.json carries a worker (under its router's entry in `servers`)."""
        return {
            "url": self.url,
            "healthy": self.healthy,
            "state": self.state,
            "metrics": self.metrics.to_json() if self.metrics is not None else None,
        }

    @classmethod
    def from_json(cls, value: Any) -> WorkerLoad | None:
        """Tolerant reader of `to_json`: None without a URL, defaults for other odd fields."""
        if not isinstance(value, Mapping) or not isinstance(url := value.get("url"), str):
            return None
        state = value.get("state")
        return cls(
            url=url[:STATE_CHARS],
            healthy=value.get("healthy") is not False,
            state=state[:STATE_CHARS] if isinstance(state, str) else "",
            metrics=ServerMetrics.from_json(value.get("metrics")),
        )


def workers_from_json(value: Any) -> tuple[WorkerLoad, ...]:
    """A router's `workers` list from progress.json (at most MAX_WORKERS_READ; entries that
    are not a worker are left out, and anything but a list reads as none)."""
    if not isinstance(value, list):
        return ()
    found = (WorkerLoad.from_json(entry) for entry in value[:MAX_WORKERS_READ])
    return tuple(worker for worker in found if worker is not None)


def healthy_count(workers: Iterable[WorkerLoad]) -> int:
    """How many of `workers` are up (see WorkerLoad.up)."""
    return sum(worker.up for worker in workers)


def _total(values: list[float | None]) -> float | None:
    said = [value for value in values if value is not None]
    return sum(said) if said else None


def _mean(values: list[float | None]) -> float | None:
    said = [value for value in values if value is not None]
    return sum(said) / len(said) if said else None


def summed(workers: Iterable[WorkerLoad]) -> ServerMetrics | None:
    """The router's load: counts and rates added over the workers that were read, the KV
    and cache-hit shares averaged over them (each worker's share of its own cache: the
    listing gives no sizes to weigh them by). None when every worker answered without
    metrics (they serve none: the router is then a server "without /metrics" too); all
    None fields when none could be read."""
    workers = list(workers)
    read = [worker.metrics for worker in workers if worker.metrics is not None]
    if not read and workers and all(worker.state == OK for worker in workers):
        return None
    kinds = {metrics.server for metrics in read}
    return ServerMetrics(
        server=kinds.pop() if len(kinds) == 1 else None,
        running=_total([m.running for m in read]),
        queued=_total([m.queued for m in read]),
        kv_usage=_mean([m.kv_usage for m in read]),
        gen_tok_s=_total([m.gen_tok_s for m in read]),
        retracted=_total([m.retracted for m in read]),
        cache_hit=_mean([m.cache_hit for m in read]),
        generation_tokens=_total([m.generation_tokens for m in read]),
    )
