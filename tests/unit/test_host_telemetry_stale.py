"""A watched host's server figures and GPUs are said stale once no read replaced them for
STALE_S (issue 30, point 6a): a telemetry thread held up must not leave a frozen figure that
passes for the load now."""

from __future__ import annotations

from gen_tui.backends.hosts.telemetry import STALE_S, HostTelemetry
from gen_tui.backends.store.progress_file import ServerReport
from gen_tui.backends.telemetry.gpus import Gpu
from gen_tui.backends.telemetry.metrics import ServerMetrics


def test_a_figure_no_read_replaced_is_said_stale() -> None:
    now = [100.0]
    telemetry = HostTelemetry(clock=lambda: now[0])
    fresh = ServerReport("ok", ServerMetrics(server="sglang", running=3))
    telemetry.server("http://gpu:30000", fresh)
    telemetry.gpus((Gpu(0, "H100", util=50),), absent=False, problem=None)
    now[0] += STALE_S
    assert telemetry.loads == {"http://gpu:30000": fresh} and not telemetry.gpus_stale
    now[0] += 2
    (report,) = telemetry.loads.values()
    assert report.state == f"stale: no reading for {STALE_S + 2:.0f} s"
    assert report.metrics is None and telemetry.gpus_stale
    telemetry.server("http://gpu:30000", fresh)  # read again: fresh again
    assert telemetry.loads == {"http://gpu:30000": fresh}
