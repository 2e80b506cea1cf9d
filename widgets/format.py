"""Formatting shared by the widgets and the headless display.

It lives with the widgets because they need it and must not import the app; the headless
display (`gen_tui.app.cli.headless`) imports it from here.
"""

from __future__ import annotations

from gen_tui.backends.figures import format_count, format_dollars, format_duration
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.backends.telemetry.workers import WorkerLoad, healthy_count
from gen_tui.backends.untrusted import one_line

__all__ = [
    "STATE_BADGES",
    "cost_text",
    "format_count",
    "format_dollars",
    "format_duration",
    "lanes_text",
    "server_name",
    "server_text",
    "state_text",
    "worker_text",
]


STATE_BADGES: dict[DatasetState, tuple[str, str]] = {
    DatasetState.LOADING: ("queued", "queued"),
    DatasetState.WAITING: ("queued", "queued"),
    DatasetState.ACTIVE: ("running", "running"),
    DatasetState.PAUSED: ("paused", "paused"),
    DatasetState.DRAINING: ("draining", "draining"),
    DatasetState.DONE: ("budget reached", "done"),
    DatasetState.EXHAUSTED: ("exhausted", "exhausted"),
    DatasetState.STOPPED: ("stopped", "stopped"),
    DatasetState.FAILED: ("failed", "failed"),
    DatasetState.NOT_STARTED: ("not started", "idle"),
}
"""(words, kind) of each state: the words every view says of it (the panel's badge, the
table's state column, `gen-tui run`'s live table), the kind its colour (`-badge-KIND`)."""


def state_text(state: DatasetState) -> str:
    """The words for `state` where only the snapshot's state is known (`gen-tui run`'s
    live table): "running", "budget reached", never the enum's "active" or "done"."""
    return STATE_BADGES[state][0]


def cost_text(snap: DatasetSnapshot) -> str:
    """`$12.30 → $86.20`: spent, then projected at the budget when it can be projected;
    a batch run's saving against the live price after it (`(saved $12.30 vs live)`)."""
    if snap.cost is None:
        return ""
    text = format_dollars(snap.cost)
    if snap.projected_cost is not None and not snap.state.finished:
        text += f" → {format_dollars(snap.projected_cost)}"
    if snap.cost_saved:
        text += f" (saved {format_dollars(snap.cost_saved)} vs live)"
    return text


def lanes_text(snap: DatasetSnapshot) -> str:
    """`box 12.3M · api 4.1M`: the dataset's tokens of this run per fleet lane, most first
    ("" for a run without lanes). The names come from a progress.json, cleaned there."""
    lanes = sorted(snap.lanes.items(), key=lambda item: -item[1])
    return " · ".join(f"{one_line(name, 40)} {format_count(tokens)}" for name, tokens in lanes)


def server_name(url: str) -> str:
    """A server URL as a panel names it: host and port (`http://` and a path say little)."""
    name = url.split("://", 1)[-1].rstrip("/")
    return one_line(name, 60)


def server_text(
    url: str,
    state: str,
    metrics: ServerMetrics | None,
    *,
    detail: bool,
    workers: tuple[WorkerLoad, ...] | None = None,
) -> str:
    """One server's load: `gpu:30000 run 64 q 3 KV 82% 2.9k tok/s retr 2`.

    Compact (`detail` False) leaves out what is zero or unknown, for an 80-column line that
    holds a server or two; `detail` says every field (cache hits too, "?" where the server
    does not say). A server without /metrics says how to get them, once per line. A router
    (`workers` given; `metrics` their sum) says first how many are healthy, so that a
    narrow line cuts the load: `router:30000 2/2 workers healthy · run 128 q 6 ...`.
    """
    load = _load_text(state, metrics, detail=detail)
    if workers is not None:
        load = f"{healthy_count(workers)}/{len(workers)} workers healthy · {load}"
    return f"{server_name(url)} {load}"


def worker_text(worker: WorkerLoad, *, detail: bool) -> str:
    """A worker behind a router, as `server_text` says a server, and whether the router
    itself takes it for unhealthy (its probes may see what a /metrics read does not)."""
    text = server_text(worker.url, worker.state, worker.metrics, detail=detail)
    return text if worker.healthy else f"{text} · router: unhealthy"


def _load_text(state: str, metrics: ServerMetrics | None, *, detail: bool) -> str:
    if state != "ok":
        return one_line(state, 80)
    if metrics is None:
        return "no /metrics (SGLang: --enable-metrics)"

    def count(value: float | None) -> str:
        return "?" if value is None else format_count(value)

    def percent(value: float | None) -> str:
        return "?" if value is None else f"{value * 100:.0f}%"

    parts = [f"run {count(metrics.running)}", f"q {count(metrics.queued)}"]
    parts.append(f"KV {percent(metrics.kv_usage)}")
    parts.append(f"{count(metrics.gen_tok_s)} tok/s")
    if detail:
        parts += [f"retr {count(metrics.retracted)}", f"cache {percent(metrics.cache_hit)}"]
    elif metrics.retracted:
        parts.append(f"retr {count(metrics.retracted)}")
    return " ".join(parts)
