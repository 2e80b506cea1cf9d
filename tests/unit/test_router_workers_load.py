"""A router's load from its workers': the sum and the health count, how progress.json carries
the workers (and reads files with none, or hostile ones), and how the strip shows them in 80
columns, a worker that is down saying so."""

from __future__ import annotations

from gen_tui.app.cli.headless import server_lines
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.store.progress_file import ProgressFile, ServerReport, merge_writer_reports
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.backends.telemetry.workers import (
    MAX_WORKERS_READ,
    WorkerLoad,
    healthy_count,
    summed,
)
from gen_tui.widgets.server_strip import WORKER_LINES, ServerLine, strip_lines

A = ServerMetrics(
    server="sglang", running=3, queued=3, kv_usage=0.2, gen_tok_s=150, retracted=0,
    cache_hit=0.5, generation_tokens=1000,
)  # fmt: skip
B = ServerMetrics(
    server="sglang", running=5, queued=1, kv_usage=0.6, gen_tok_s=250, retracted=2,
    cache_hit=None, generation_tokens=3000,
)  # fmt: skip
ROUTER = "http://router:30000"
UP_A = WorkerLoad("http://gpu-a:30001", True, "ok", A)
UP_B = WorkerLoad("http://gpu-b:30002", True, "ok", B)
DOWN_B = WorkerLoad("http://gpu-b:30002", True, "down: cannot connect: refused")


def test_the_sum_adds_counts_and_rates_and_averages_shares() -> None:
    total = summed([UP_A, UP_B])
    assert total == ServerMetrics(
        server="sglang", running=8, queued=4, kv_usage=0.4, gen_tok_s=400, retracted=2,
        cache_hit=0.5, generation_tokens=4000,
    )  # fmt: skip
    assert healthy_count([UP_A, UP_B]) == 2


def test_a_down_worker_is_left_out_of_the_sum_and_the_healthy_count() -> None:
    assert summed([UP_A, DOWN_B]) == ServerMetrics(
        server="sglang", running=3, queued=3, kv_usage=0.2, gen_tok_s=150, retracted=0,
        cache_hit=0.5, generation_tokens=1000,
    )  # fmt: skip
    assert healthy_count([UP_A, DOWN_B]) == 1
    # The router's own probes count too: answering is not enough when it says unhealthy.
    assert healthy_count([UP_A, WorkerLoad(UP_B.url, False, "ok", B)]) == 1
    # Nothing read: every field unknown, which is not "serves no /metrics".
    assert summed([DOWN_B]) == ServerMetrics()
    assert summed([]) == ServerMetrics()


def test_workers_without_metrics_make_a_router_without_metrics() -> None:
    bare = [WorkerLoad("http://a:1"), WorkerLoad("http://b:2")]
    assert summed(bare) is None
    assert summed([WorkerLoad("http://a:1"), UP_B]) == ServerMetrics(
        server="sglang", running=5, queued=1, kv_usage=0.6, gen_tok_s=250, retracted=2,
        generation_tokens=3000,
    )  # fmt: skip


def _snapshot() -> RunSnapshot:
    return RunSnapshot(
        datasets=(), concurrency=12, inflight=12, utilisation=1.0, elapsed_s=1.0, active_s=1.0,
        stopping=False, paused=False, servers={ROUTER: "ok", "http://plain:1": "ok"},
        server_metrics={ROUTER: summed([UP_A, DOWN_B]), "http://plain:1": A},
        server_workers={ROUTER: (UP_A, DOWN_B)},
    )  # fmt: skip


def test_progress_json_carries_the_workers_under_their_router() -> None:
    servers = _snapshot().servers_json()
    assert "workers" not in servers["http://plain:1"]
    assert servers[ROUTER]["metrics"]["running"] == 3
    assert servers[ROUTER]["workers"] == [
        {"url": UP_A.url, "healthy": True, "state": "ok", "metrics": A.to_json()},
        {"url": DOWN_B.url, "healthy": True, "state": DOWN_B.state, "metrics": None},
    ]
    read = ProgressFile.parse({"servers": servers})
    assert read is not None and read.servers is not None
    router = read.servers[ROUTER]
    assert router.workers is not None
    assert [(w.url, w.up) for w in router.workers] == [(UP_A.url, True), (DOWN_B.url, False)]
    assert router.workers[0].metrics == ServerMetrics.from_json(A.to_json())
    assert read.servers["http://plain:1"].workers is None


def test_odd_or_hostile_workers_cost_only_themselves() -> None:
    many = [{"url": f"http://w{i}:1", "healthy": True} for i in range(MAX_WORKERS_READ * 3)]
    entry = {
        "state": "ok",
        "metrics": None,
        "workers": [7, {"healthy": True}, {"url": "http://w:1", "healthy": "no", "state": 3}],
    }
    read = ProgressFile.parse(
        {
            "servers": {
                "http://r:1": entry,
                "http://many:1": {"state": "ok", "workers": many},
                "http://odd:1": {"state": "ok", "workers": "all of them"},
                "http://old:1": {"state": "ok", "metrics": None},  # a writer before workers
            }
        }
    )
    assert read is not None and read.servers is not None and read.ignored == ()
    assert read.servers["http://r:1"].workers == (WorkerLoad("http://w:1", True, ""),)
    assert len(read.servers["http://many:1"].workers or ()) == MAX_WORKERS_READ
    assert read.servers["http://odd:1"].workers == ()
    assert read.servers["http://old:1"] == ServerReport("ok", None)


def test_a_remote_router_is_as_its_writer_read_it_not_as_the_box_did() -> None:
    # The watcher on the box reads the router's own URL: no /metrics there (a 404).
    box = {ROUTER: ServerReport("ok", None), "http://plain:1": ServerReport("ok", A)}
    writer = ServerReport("ok", summed([UP_A, UP_B]), workers=(UP_A, UP_B))
    found = dict(box)
    merge_writer_reports(
        found,
        {
            ROUTER: writer,
            "http://plain:1": ServerReport("ok", B),  # the box's own read is the fresher
            "http://other:1": ServerReport("unreachable: refused"),
        },
    )
    assert found == {
        ROUTER: writer,
        "http://plain:1": ServerReport("ok", A),
        "http://other:1": ServerReport("unreachable: refused"),
    }
    merge_writer_reports(found, {ROUTER: ServerReport("ok", A, workers=())})
    assert found[ROUTER] is writer, "a second writer's router replaced the first's"


def test_the_strip_shows_the_router_sum_and_a_line_per_worker_in_80_columns() -> None:
    router = ServerLine(ROUTER, "ok", summed([UP_A, UP_B]), (UP_A, UP_B))
    lines = strip_lines((router,), 80, tall=False)
    assert lines == [
        "srv router:30000 2/2 workers healthy · run 8 q 4 KV 40% 400 tok/s retr 2",
        "    gpu-a:30001 run 3 q 3 KV 20% 150 tok/s",
        "    gpu-b:30002 run 5 q 1 KV 60% 250 tok/s retr 2",
    ]
    assert all(len(line) <= 80 for line in lines)
    down = ServerLine(ROUTER, "ok", summed([UP_A, DOWN_B]), (UP_A, DOWN_B))
    lines = strip_lines((down,), 80, tall=False)
    assert lines[0].startswith("srv router:30000 1/2 workers healthy · run 3 q 3")
    assert lines[2] == "    gpu-b:30002 down: cannot connect: refused"
    doubted = ServerLine(ROUTER, "ok", A, (WorkerLoad(UP_A.url, False, "ok", A),))
    assert strip_lines((doubted,), 80, tall=False)[1].endswith(" · router: unhealthy")


def test_many_workers_are_counted_not_listed_and_tall_says_every_field() -> None:
    workers = tuple(WorkerLoad(f"http://gpu-{i}:30000", True, "ok", A) for i in range(6))
    router = ServerLine(ROUTER, "ok", summed(workers), workers)
    plain = ServerLine("http://plain:1", "ok", B)
    lines = strip_lines((router, plain), 160, tall=False)
    assert len(lines) == 1 + WORKER_LINES
    assert lines[0].startswith("srv router:30000 6/6 workers healthy")
    assert "│ plain:1 run 5" in lines[0]
    assert lines[1].startswith("    gpu-0:30000 run 3") and lines[-1] == "    +5 more workers"
    tall = strip_lines((router, plain), 160, tall=True)
    assert tall[0].startswith("srv router:30000 6/6 workers healthy · run 18")
    assert [line.split()[0] for line in tall[1:7]] == [f"gpu-{i}:30000" for i in range(6)]
    assert all("cache 50%" in line for line in tall[1:7])
    assert tall[7].startswith("srv plain:1 run 5")
    # A router from a file that does not know workers is a server line, as before.
    assert strip_lines((ServerLine(ROUTER, "ok", A),), 80, tall=False) == [
        "srv router:30000 run 3 q 3 KV 20% 150 tok/s"
    ]


def test_headless_status_says_the_router_and_only_its_workers_that_are_not_up() -> None:
    snap = _snapshot()
    assert server_lines(snap, detail=False) == [
        "router:30000 1/2 workers healthy · run 3 q 3 KV 20% 150 tok/s",
        "worker gpu-b:30002 down: cannot connect: refused",
        "plain:1 run 3 q 3 KV 20% 150 tok/s",
    ]
