"""What the server strip is handed: this process's runs' servers first, then those watched
runs report in progress.json, each URL once; a server not read yet, or from a version 1
file that never said, is no news."""

from __future__ import annotations

from gen_tui.app.dashboard.sources import Activity
from gen_tui.app.dashboard.summary import server_view
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.store.progress_file import ServerReport
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.widgets.server_strip import ServerLine

LOAD = ServerMetrics(running=3, queued=0)


def _pool(servers: dict[str, str], metrics: dict[str, ServerMetrics | None]) -> RunSnapshot:
    return RunSnapshot(
        datasets=(), concurrency=1, inflight=0, utilisation=0.0, elapsed_s=0.0, active_s=0.0,
        stopping=False, paused=False, servers=servers, server_metrics=metrics,
    )  # fmt: skip


def test_hosted_then_watched_each_url_once() -> None:
    pool = _pool(
        {"http://a": "ok", "http://b": "ok", "http://c": "unreachable: refused"},
        {"http://a": LOAD},
    )
    watched = {
        "http://a": ServerReport("ok", ServerMetrics(running=99)),  # the engine's own wins
        "http://d": ServerReport("ok", None),  # serves no /metrics: said
        "http://e": ServerReport("ok", told=False),  # a version 1 file: nothing said
        "http://f": ServerReport("unreachable: timeout", told=False),
    }
    lines = server_view(Activity("running", ("A",), [pool]), watched)
    assert lines == (
        ServerLine("http://a", "ok", LOAD),
        ServerLine("http://c", "unreachable: refused", None),
        ServerLine("http://d", "ok", None),
        ServerLine("http://f", "unreachable: timeout", None),
    )
    assert server_view(None, {}) == ()
