"""The header's servers' figures for watched runs (runs of other processes): their pools'
in flight beside their servers' run and queued, as for a hosted run; a server whose load is
not known, or a progress.json's figures out of range, make no figure up."""

from __future__ import annotations

from gen_tui.app.dashboard.sources import Activity, WatchedFlight
from gen_tui.app.dashboard.summary import header_view
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.widgets.header import header_parts


def _header(flight: WatchedFlight) -> list[str]:
    activity = Activity("running", ("A",), (), watched_flight=flight)
    view = header_view({}, activity, quitting=False, idle="idle", filter_text="", hosts=())
    return header_parts(view)


def test_the_watched_servers_are_summed_beside_the_watched_pools() -> None:
    loads = (ServerMetrics(running=60, queued=4), ServerMetrics(running=30, queued=0))
    shown = _header(WatchedFlight(100, 128, loads))
    assert "in flight 100/128" in shown, shown
    assert "(server: 90 run, 4 queued, 6 in transit)" in shown, shown


def test_one_server_not_known_says_no_servers_figure() -> None:
    # Down, stale or without /metrics: a part of the servers would pass for all of them.
    for unknown in (None, ServerMetrics(running=3)):
        shown = _header(WatchedFlight(10, 16, (ServerMetrics(running=5, queued=0), unknown)))
        assert "in flight 10/16" in shown, shown
        assert not any(part.startswith("(server") for part in shown), shown


def test_a_hostile_progress_json_figure_is_no_figure() -> None:
    for hostile in (1e300, -5, "NaN", True, [1]):
        progress = ProgressFile.parse(
            {
                "pool": {"inflight": 8, "concurrency": 8},
                "servers": {
                    "http://s": {"state": "ok", "metrics": {"running": hostile, "queued": 0}}
                },
            }
        )
        assert progress is not None and progress.servers is not None
        metrics = progress.servers["http://s"].metrics
        shown = _header(WatchedFlight(8, 8, (metrics,)))
        assert not any(part.startswith("(server") for part in shown), (hostile, shown)


def test_a_server_its_writer_says_is_down_is_said_in_the_header() -> None:
    # As a hosted run's header counts its engine's server states (issue 31).
    shown = _header(WatchedFlight(24, 24, (None, ServerMetrics(running=1, queued=0)), 1))
    assert shown[0] == "1/2 server(s) unreachable", shown
