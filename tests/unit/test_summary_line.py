"""The run's last line says how long it took, also when only batches did the work."""

from gen_tui.backends.progress.snapshot import DatasetState, RunSnapshot
from gen_tui.backends.progress.summary import summary_line
from tests.support.panel_snapshots import snapshot


def run(active_s: float, elapsed_s: float, utilisation: float) -> RunSnapshot:
    done = snapshot("B1", state=DatasetState.DONE, tokens=20_138, max_tokens=20_000)
    return RunSnapshot(
        datasets=(done,),
        concurrency=128,
        inflight=0,
        utilisation=utilisation,
        elapsed_s=elapsed_s,
        active_s=active_s,
        stopping=False,
        paused=False,
    )


def test_a_live_run_says_its_active_time_and_the_pool() -> None:
    line = summary_line(run(active_s=70.0, elapsed_s=75.0, utilisation=0.5))
    assert line.startswith("summary: 20,138 tokens in 1m10s, pool utilisation 50.0%; "), line
    assert "B1 done 20,138/20,000 (+0.690%)" in line, line


def test_a_batch_only_run_says_its_wall_time_not_an_empty_pool() -> None:
    # Seen trying `--api openai-batch` as a new user: "20,138 tokens in 0s, pool
    # utilisation 0.0%" for a run of 80 s whose live pool never sent a request.
    line = summary_line(run(active_s=0.0, elapsed_s=80.0, utilisation=0.0))
    assert line.startswith("summary: 20,138 tokens in 1m20s, no live requests; "), line
    assert "pool utilisation" not in line, line
