"""`--concurrency auto`'s tuner against a model server: it converges near the optimum from
below and from above, backs off on retractions, settles at the server's batch plus a small
queue, honours max_running_requests, and climbs on the token rate without metrics."""

from __future__ import annotations

from gen_tui.backends.config.run import queued_concurrency
from gen_tui.backends.engine.autotune import ConcurrencyTuner
from gen_tui.backends.engine.slots import SlotPool
from gen_tui.backends.telemetry.metrics import ServerMetrics


class ModelServer:
    """`slots` run at once, the rest queue; past `knee` in the batch its KV cache overflows
    and every look sees new retractions."""

    def __init__(self, slots: int, knee: int | None) -> None:
        self.slots = slots
        self.knee = knee
        self.retracted = 0

    def look(self, inflight: int) -> ServerMetrics:
        running = min(inflight, self.slots)
        if self.knee is not None and running > self.knee:
            self.retracted += running - self.knee
        kv = min(1.0, running / self.knee) * 0.9 if self.knee else 0.1
        return ServerMetrics(
            running=running, queued=inflight - running, kv_usage=kv, retracted=self.retracted
        )


def _fill(pool: SlotPool) -> None:
    """Every slot the target allows in flight (the engine keeps the pool full)."""
    pool.tasks = {object(): "A" for _ in range(int(pool.limit))}  # type: ignore[misc]


def _run(tuner: ConcurrencyTuner, server: ModelServer, steps: int) -> list[int]:
    targets = []
    for step in range(steps):
        _fill(tuner.pool)
        tuner.observe([server.look(len(tuner.pool))], 0, float(step))
        targets.append(tuner.pool.concurrency)
    return targets


def test_from_below_it_finds_the_kv_limit_and_stays_under_it() -> None:
    pool = SlotPool(512)
    tuner = ConcurrencyTuner(pool, 512, start=4)
    targets = _run(tuner, ModelServer(slots=256, knee=60), 80)
    assert max(targets[:10]) > 60  # it found the limit within seconds (doubling)
    late = targets[40:]
    assert sum(late) / len(late) >= 0.9 * 60, late
    assert all(0.85 * 60 <= t <= 1.1 * 60 for t in late), late  # a step past it, then back
    assert tuner.ceiling is not None


def test_from_above_it_backs_off_on_retractions() -> None:
    pool = SlotPool(512)
    tuner = ConcurrencyTuner(pool, 512, start=400)
    server = ModelServer(slots=512, knee=60)
    targets = _run(tuner, server, 60)
    assert targets[0] == 400 and targets[1] < 400  # a baseline, then retractions seen
    assert min(targets[:12]) <= 60
    late = targets[30:]
    assert 0.7 * 60 <= sum(late) / len(late) <= 66, late


def test_a_queue_at_the_server_means_its_batch_is_full() -> None:
    pool = SlotPool(512)
    tuner = ConcurrencyTuner(pool, 512, start=8)
    targets = _run(tuner, ModelServer(slots=100, knee=None), 40)
    assert targets[-1] <= queued_concurrency(100)
    assert min(targets[20:]) >= 100  # never below the batch: its slots stay full


def test_max_running_requests_caps_it() -> None:
    pool = SlotPool(512)
    tuner = ConcurrencyTuner(pool, 512, start=8)
    tuner.limit_to([64, 64])
    assert tuner.ceiling_max == queued_concurrency(128)
    targets = _run(tuner, ModelServer(slots=1000, knee=None), 30)
    assert max(targets) == queued_concurrency(128)
    other = ConcurrencyTuner(SlotPool(512), 512)
    other.limit_to([64, None])  # one server does not say: no cap from a guess
    assert other.ceiling_max == 512


def test_without_metrics_it_climbs_on_the_token_rate() -> None:
    pool = SlotPool(512)
    tuner = ConcurrencyTuner(pool, 512, start=10)
    tokens = 0.0
    for second in range(400):
        target = pool.concurrency
        tokens += 100 * target * max(0.0, 1 - (target / 120) ** 4)  # best near 80
        _fill(pool)
        tuner.observe([None], int(tokens), float(second))
    assert 50 <= pool.concurrency <= 110, pool.concurrency
    assert "token rate" in tuner.reason


def test_a_429s_lower_limit_stays_under_the_target() -> None:
    pool = SlotPool(512)
    tuner = ConcurrencyTuner(pool, 512, start=64)
    pool.cut()
    assert pool.limit == 32
    _fill(pool)
    for retracted in (0, 5, 5):  # a baseline, a retraction, a quiet look
        tuner.observe([ServerMetrics(running=32, queued=0, retracted=retracted)], 0, 1.0)
        assert pool.limit == 32  # the rate limit's halving holds under the target
    assert pool.concurrency == int(64 * 0.85)  # cut once; a pool held at 32 does not grow it


def test_it_never_climbs_past_what_the_budgets_have_room_for() -> None:
    """Issue 29: a 4,000-token budget at a 128 cap holds about 31 answers; auto doubled
    16 -> 128 before any answer was back. Room on the server does not override it."""
    pool = SlotPool(512)
    tuner = ConcurrencyTuner(pool, 512, start=16)
    server = ModelServer(slots=512, knee=None)
    targets = []
    for step in range(20):
        _fill(pool)
        tuner.observe([server.look(len(pool))], 0, float(step), budget_room=31)
        targets.append(pool.concurrency)
    assert max(targets) == 31, targets
    assert "room for about 31 answers" in tuner.reason
    tuner.observe([server.look(len(pool))], 0, 21.0, budget_room=None)
    assert pool.concurrency > 31  # no token budget: the servers alone decide


def test_room_for_one_answer_is_said_in_the_singular() -> None:
    pool = SlotPool(512)
    tuner = ConcurrencyTuner(pool, 512, start=16)
    _fill(pool)
    tuner.observe([ModelServer(slots=512, knee=None).look(len(pool))], 0, 0.0, budget_room=1)
    assert tuner.reason == "the budgets have room for about 1 answer"  # it said "1 answers"
