"""progress.json's `servers`: version 2 carries each server's load, version 1 files (the
state alone) still read, and odd entries cost themselves alone."""

from __future__ import annotations

from pathlib import Path

import orjson

from gen_tui.backends.progress.snapshot import (
    PROGRESS_VERSION,
    DatasetSnapshot,
    DatasetState,
    RunSnapshot,
)
from gen_tui.backends.store.progress_file import MAX_SERVERS, ProgressFile, ServerReport
from gen_tui.backends.telemetry.metrics import ServerMetrics

LOAD = ServerMetrics(
    server="sglang", running=64, queued=3, kv_usage=0.82, gen_tok_s=2950.5, retracted=2,
    cache_hit=0.1, generation_tokens=1e6,
)  # fmt: skip


def _dataset() -> DatasetSnapshot:
    return DatasetSnapshot(
        name="B2", state=DatasetState.ACTIVE, tokens=10, samples=1, max_tokens=100,
        max_samples=None, budget_mode="strict", inflight=1, errors=0, malformed=0,
        mean_tokens=10.0, tok_s=1.0, samples_s=0.1, eta_s=None, resumed_tokens=0,
        resumed_samples=0, started_at=1.0, updated_at=2.0, last_record_at=None, pid=7,
        host="box",
    )  # fmt: skip


def _run(ds: DatasetSnapshot) -> RunSnapshot:
    return RunSnapshot(
        datasets=(ds,), concurrency=8, inflight=1, utilisation=0.5, elapsed_s=1.0,
        active_s=1.0, stopping=False, paused=False,
        servers={"http://gpu:30000": "ok", "http://gpu:30001": "unreachable: refused"},
        server_metrics={"http://gpu:30000": LOAD, "http://gpu:30001": None},
    )  # fmt: skip


def test_version_2_writes_each_servers_state_and_load(tmp_path: Path) -> None:
    ds = _dataset()
    path = tmp_path / "progress.json"
    ProgressFile.write(path, _run(ds), ds)
    raw = orjson.loads(path.read_bytes())
    assert raw["version"] == PROGRESS_VERSION == 2
    metrics = {"running": 64, "queued": 3, "kv_usage": 0.82, "gen_tok_s": 2950.5}
    metrics |= {"retracted": 2, "cache_hit": 0.1}
    assert raw["servers"] == {
        "http://gpu:30000": {"state": "ok", "metrics": metrics},
        "http://gpu:30001": {"state": "unreachable: refused", "metrics": None},
    }
    read = ProgressFile.read(path)
    assert read is not None and read.servers is not None
    ok = read.servers["http://gpu:30000"]
    assert ok.state == "ok" and ok.metrics is not None
    assert (ok.metrics.running, ok.metrics.kv_usage, ok.metrics.gen_tok_s) == (64, 0.82, 2950.5)
    assert read.servers["http://gpu:30001"] == ServerReport("unreachable: refused", None)


def test_a_version_1_file_still_reads() -> None:
    read = ProgressFile.parse({"version": 1, "pid": 3, "servers": {"http://a": "ok"}})
    assert read is not None and read.pid == 3
    assert read.servers == {"http://a": ServerReport("ok", told=False)}


def test_odd_server_entries_cost_themselves_alone() -> None:
    read = ProgressFile.parse(
        {
            "pid": 3,
            "servers": {
                "http://a": {"state": 5, "metrics": {"running": "x", "queued": 2}},
                "http://b": [1],
                "http://c": {"metrics": "none"},
            },
        }
    )
    assert read is not None and read.pid == 3 and read.servers is not None
    assert read.servers["http://a"] == ServerReport("", ServerMetrics(queued=2))
    assert "http://b" not in read.servers
    assert read.servers["http://c"] == ServerReport("", None)
    many = ProgressFile.parse({"servers": {f"http://{i}": "ok" for i in range(10 * MAX_SERVERS)}})
    assert many is not None and len(many.servers or {}) == MAX_SERVERS
    wrong = ProgressFile.parse({"servers": ["http://a"], "pid": 1})
    assert wrong is not None and wrong.servers is None and wrong.ignored == ("servers",)
