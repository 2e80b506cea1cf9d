"""What the header sums up: totals over every panel, and what the active source is doing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from gen_tui.app.dashboard.sources import Activity
from gen_tui.backends.progress.snapshot import DatasetState, RunSnapshot
from gen_tui.backends.store.progress_file import ServerReport
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.widgets.dataset_panel import PanelView, shown_rates
from gen_tui.widgets.format import server_text
from gen_tui.widgets.gpu_strip import GpuLine
from gen_tui.widgets.header import HeaderView
from gen_tui.widgets.server_strip import ServerLine


def header_view(
    views: Mapping[str, PanelView],
    activity: Activity | None,
    *,
    quitting: bool,
    idle: str,
    filter_text: str,
    hosts: tuple[tuple[str, str], ...],
    readonly: bool = False,
    note: str = "",
) -> HeaderView:
    """The header for panels showing `views`.

    `activity`: the first source with something running (None: the header says `idle`,
    "idle" or "watching"); `quitting` overrides a run of this process, which quitting stops.
    """
    snaps = [v.snapshot for v in views.values() if v.snapshot is not None]
    latest = list(activity.pools) if activity is not None else []
    countdowns = list(activity.countdowns) if activity is not None else []
    if quitting:
        state = "quitting"  # the app's own runs drain; watched runs go on without it
    elif activity is None:
        state = idle
    else:
        state = activity.state
    where = ""
    names = activity.names if activity is not None else ()
    first = next((s for s in snaps if s.name in names), None)
    if first is not None:
        where = f"pid {first.pid} on {first.host}"
    running, queued = server_requests(latest)
    inflight = sum(s.inflight for s in latest)
    concurrency = sum(s.concurrency for s in latest)
    servers = sum(len(s.servers) for s in latest)
    down = sum(1 for s in latest for status in s.servers.values() if status != "ok")
    if not latest and activity is not None and (watched := activity.watched_flight):
        # runs of other processes: their progress.json's pools, their servers' /metrics
        inflight, concurrency = watched.inflight, watched.concurrency
        running, queued = requests_of(watched.servers)
        servers, down = len(watched.servers), watched.servers_down
    return HeaderView(
        state=state,
        tokens=sum(s.tokens for s in snaps),
        tok_s=sum(shown_rates(view)[0] for view in views.values()),  # the panels' own rule
        done=sum(1 for s in snaps if s.state in (DatasetState.DONE, DatasetState.EXHAUSTED)),
        total=len(views),
        inflight=inflight,
        concurrency=concurrency,
        utilisation=(sum(s.utilisation for s in latest) / len(latest)) if latest else None,
        server_running=running,
        server_queued=queued,
        countdown_s=min(countdowns) if countdowns else None,
        where=where,
        filter=filter_text,
        servers=servers,
        servers_down=down,
        hosts=hosts,
        readonly=readonly,
        note=note,
        cost=sum(costs) if (costs := [s.cost for s in snaps if s.cost is not None]) else None,
        cost_per_hour=sum(
            s.cost_per_hour for s in snaps if s.cost_per_hour and not s.state.finished
        )
        or None,
    )


def server_requests(pools: Sequence[RunSnapshot]) -> tuple[float | None, float | None]:
    """The requests the pools' servers run and queue, summed once per server (their
    /metrics); (None, None) unless every server the pools use says both."""
    loads: dict[str, ServerMetrics | None] = {}
    for pool in pools:
        for url in pool.servers:
            loads[_same(url)] = pool.server_metrics.get(url)
    return requests_of(loads.values())


def requests_of(
    loads: Iterable[ServerMetrics | None],
) -> tuple[float | None, float | None]:
    """The requests `loads` (one per server) run and queue, summed; (None, None) for no
    server, or unless each one says both (a part of the servers would pass for all)."""
    each = list(loads)
    known = [m for m in each if m is not None and None not in (m.running, m.queued)]
    if not each or len(known) != len(each):
        return None, None
    return sum(m.running or 0 for m in known), sum(m.queued or 0 for m in known)


def server_view(
    activity: Activity | None, watched: Mapping[str, ServerReport]
) -> tuple[ServerLine, ...]:
    """The servers' load for the strip: this process's runs' (their last snapshots), then
    those the watched runs' progress.json files report; each URL once, in that order. A
    server not read yet is left out unless it is down (nothing to say yet is no news)."""
    lines: dict[str, ServerLine] = {}
    for pool in activity.pools if activity is not None else ():
        for url, state in pool.servers.items():
            if url in pool.server_metrics or state != "ok":
                metrics, workers = pool.server_metrics.get(url), pool.server_workers.get(url)
                lines.setdefault(url, ServerLine(url, state, metrics, workers))
    for url, report in watched.items():
        if report.state and (report.told or report.state != "ok"):
            lines.setdefault(url, ServerLine(url, report.state, report.metrics, report.workers))
    return tuple(lines.values())


def _same(url: str) -> str:
    return url.rstrip("/")


def with_supervised(
    lines: tuple[ServerLine, ...], supervised: Mapping[str, str]
) -> tuple[ServerLine, ...]:
    """The strip's lines with each supervised server's state (`supervised`: URL -> "name:
    state"), and a line for each supervised server the strip had not listed yet."""
    if not supervised:
        return lines
    words = {_same(url): said for url, said in supervised.items()}
    out = [
        replace(line, supervised=words.pop(_same(line.url))) if _same(line.url) in words else line
        for line in lines
    ]
    out += [ServerLine(url, said, None) for url, said in words.items()]
    return tuple(out)


def server_loads(lines: tuple[ServerLine, ...]) -> dict[str, str]:
    """Each server's /metrics load as the strip says it (its name left out), by URL."""
    return {
        _same(line.url): server_text(
            line.url, line.state, line.metrics, detail=True, workers=line.workers
        ).partition(" ")[2]
        for line in lines
        if line.metrics is not None
    }


def gpu_view(activity: Activity | None, watched: tuple[GpuLine, ...]) -> tuple[GpuLine, ...]:
    """The GPU strip: this machine's (NVML, read by this process's runs), then the watched
    hosts' (their watchers). A watched local host shows this machine's GPUs already: they
    are not shown twice."""
    here = next((pool.gpus for pool in activity.pools if pool.gpus), ()) if activity else ()
    if any(line.this_machine for line in watched):
        here = ()
    return (*(GpuLine("here", gpu, history) for gpu, history in here), *watched)


def empty_text(hosts: tuple[tuple[str, str], ...], filtered: bool) -> str:
    """What the board says while it has no panel: each host's state in full (a host that
    cannot be reached must be visible at 80×24, not only in a header part that may not fit),
    then where to look next."""
    if filtered:
        return "No dataset matches the filter (/ to change it, Esc to clear)."
    lines = [f"{name}: {state}" for name, state in hosts if state != "connected"]
    if not lines:
        lines = [f"{name}: connected; no dataset folders and no run found yet" for name, _ in hosts]
    if not lines:
        return ""
    return "\n".join([*lines, "", "l lists the runs of every host · ? help · q quit"])
