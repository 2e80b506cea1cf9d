"""Each move of `--concurrency auto`'s target is told once, with the figure behind it; a
look that changes nothing tells nothing."""

from __future__ import annotations

from gen_tui.backends.config.run import queued_concurrency
from gen_tui.backends.engine.autotune import ConcurrencyTuner
from gen_tui.backends.engine.slots import SlotPool
from gen_tui.backends.telemetry.metrics import ServerMetrics


def _tuner(start: int) -> tuple[ConcurrencyTuner, list[tuple[int, int, str]]]:
    moves: list[tuple[int, int, str]] = []
    tuner = ConcurrencyTuner(SlotPool(512), 512, start=start, on_move=lambda *m: moves.append(m))
    return tuner, moves


def _full(tuner: ConcurrencyTuner) -> None:
    tuner.pool.tasks = {object(): "A" for _ in range(tuner.pool.concurrency)}  # type: ignore[misc]


def test_moves_name_their_figures_and_quiet_looks_say_nothing() -> None:
    tuner, moves = _tuner(16)
    assert moves == []  # the start is the engine's to tell
    _full(tuner)
    tuner.observe([ServerMetrics(running=16, queued=0, kv_usage=0.2, retracted=0)], 0, 0.0)
    assert moves == []  # the first look only reads the retraction count
    tuner.observe([ServerMetrics(running=16, queued=0, kv_usage=0.2, retracted=0)], 0, 1.0)
    assert moves == [(16, 32, "starting: doubling (KV 20%, 0 queued)")]
    _full(tuner)
    tuner.observe([ServerMetrics(running=32, queued=0, kv_usage=0.6, retracted=7)], 0, 2.0)
    assert moves[-1] == (32, 27, "7 retractions since the last look, KV 60%")
    tuner.observe([ServerMetrics(running=27, queued=0, kv_usage=0.6, retracted=7)], 0, 3.0)
    assert len(moves) == 2  # the look after a cut is held: no move, no line
    tuner.observe([ServerMetrics(running=27, queued=0, kv_usage=0.97, retracted=7)], 0, 4.0)
    assert moves[-1][2] == "KV cache 97% full" and moves[-1][:2] == (27, 19)


def test_the_servers_batch_limit_is_a_move_of_its_own() -> None:
    tuner, moves = _tuner(64)
    tuner.limit_to([8])
    assert moves == [
        (64, queued_concurrency(8), "the servers run at most 8 (max_running_requests)")
    ]
    tuner.limit_to([8])
    assert len(moves) == 1


def test_without_metrics_the_token_rate_is_the_figure() -> None:
    tuner, moves = _tuner(16)
    tuner.observe([None], 0, 0.0)
    tuner.observe([None], 10_000, 10.0)
    assert moves == [(16, 18, "no server metrics: token rate 1000 tok/s, stepping up")]
    tuner.observe([None], 15_000, 20.0)
    assert moves[-1] == (
        18,
        15,
        "no server metrics: token rate 500 tok/s after 1000, stepping down (that step did not pay)",
    )
