"""How a server's load reads: the short form (80 columns, headless status) and the full one,
a server without metrics saying how to get them, and hostile server text made harmless."""

from __future__ import annotations

import io

from rich.console import Console

from gen_tui.app.cli.headless import HeadlessDisplay, server_lines
from gen_tui.app.cli.live_table import live_table
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.widgets.format import server_text
from gen_tui.widgets.server_strip import MAX_LINES, ServerLine, strip_lines

BUSY = ServerMetrics(
    server="sglang", running=64, queued=3, kv_usage=0.823, gen_tok_s=2950, retracted=2,
    cache_hit=0.1,
)  # fmt: skip
CALM = ServerMetrics(running=10, queued=0, kv_usage=0.1, gen_tok_s=500, retracted=0)


def test_short_and_full_forms() -> None:
    url = "http://gpu-box:30000/"
    assert server_text(url, "ok", BUSY, detail=False) == (
        "gpu-box:30000 run 64 q 3 KV 82% 2.95k tok/s retr 2"
    )
    assert server_text(url, "ok", CALM, detail=False) == "gpu-box:30000 run 10 q 0 KV 10% 500 tok/s"
    assert server_text(url, "ok", ServerMetrics(running=1), detail=True) == (
        "gpu-box:30000 run 1 q ? KV ? ? tok/s retr ? cache ?"
    )
    assert server_text(url, "ok", None, detail=False) == (
        "gpu-box:30000 no /metrics (SGLang: --enable-metrics)"
    )
    down = server_text(url, "unreachable: \x1b]52;c;evil\x07 refused", None, detail=False)
    assert "\x1b" not in down and "\x07" not in down and "refused" in down


def test_the_strip_fits_80_columns_and_counts_what_did_not_fit() -> None:
    servers = tuple(ServerLine(f"http://10.0.0.{i}:30000", "ok", BUSY) for i in range(5))
    (line,) = strip_lines(servers, 80, tall=False)
    assert len(line) <= 80
    assert line.startswith("srv 10.0.0.0:30000 run 64") and line.endswith(" +4 more")
    wide = strip_lines(servers[:2], 160, tall=False)
    assert wide == [
        "srv 10.0.0.0:30000 run 64 q 3 KV 82% 2.95k tok/s retr 2 │ "
        "10.0.0.1:30000 run 64 q 3 KV 82% 2.95k tok/s retr 2"
    ]
    tall = strip_lines(servers, 160, tall=True)
    assert len(tall) == MAX_LINES and tall[-1].strip() == "+2 more servers"
    assert all("cache 10%" in line for line in tall[:-1])
    assert strip_lines((), 80, tall=True) == []


def _run(metrics: dict[str, ServerMetrics | None]) -> RunSnapshot:
    return RunSnapshot(
        datasets=(), concurrency=150, inflight=150, utilisation=1.0, elapsed_s=1.0,
        active_s=1.0, stopping=False, paused=False,
        servers={"http://a:1": "ok", "http://b:2": "ok", "http://c:3": "unreachable: refused"},
        server_metrics=metrics,
    )  # fmt: skip


def test_headless_status_has_a_line_per_server_read_or_down() -> None:
    snap = _run({"http://a:1": BUSY})  # b not read yet: nothing to say of it
    assert server_lines(snap, detail=False) == [
        "a:1 run 64 q 3 KV 82% 2.95k tok/s retr 2",
        "c:3 unreachable: refused",
    ]
    stream = io.StringIO()
    HeadlessDisplay(stream).write_status(snap)
    lines = stream.getvalue().splitlines()
    assert [line.split(" status: ")[1] for line in lines] == [
        "server a:1 run 64 q 3 KV 82% 2.95k tok/s retr 2",
        "server c:3 unreachable: refused",
    ]


def test_the_final_block_leaves_out_the_last_busy_read() -> None:
    # The last /metrics read was taken while the run was still sending: at the end it
    # said "run 64 q 3 ... 2.95k tok/s" beside "0 in flight". A server down still says so.
    stream = io.StringIO()
    HeadlessDisplay(stream).write_status(_run({"http://a:1": BUSY}), final=True)
    lines = [line.split(" status: ")[1] for line in stream.getvalue().splitlines()]
    assert lines == ["server c:3 unreachable: refused"]


def test_the_live_table_shows_the_servers_under_its_header() -> None:
    stream = io.StringIO()
    snap = _run({"http://a:1": BUSY, "http://b:2": None})
    Console(file=stream, width=80, color_system=None).print(live_table(snap, 80))
    lines = stream.getvalue().splitlines()
    assert lines[1:4] == [
        "a:1 run 64 q 3 KV 82% 2.95k tok/s retr 2",
        "b:2 no /metrics (SGLang: --enable-metrics)",
        "c:3 unreachable: refused",
    ]
