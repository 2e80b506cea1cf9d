"""The survival estimate of answer lengths: finished answers are events, in-flight ones are
censored at what they have produced, and a prior fills what neither tells."""

import itertools
import math
import random

import pytest

from gen_tui.backends.budget.lengths import (
    InFlight,
    LatencyLine,
    SurvivalModel,
    bin_edges,
    truncated_exponential,
)
from gen_tui.backends.budget.rules import Budget, BudgetMode, LengthModel, may_dispatch


def seen(cap: int, lengths: list[int]) -> SurvivalModel:
    """A model that saw `lengths` come back in this run (not a resumed run's history)."""
    model = SurvivalModel(cap)
    for length in lengths:
        model.observe(length, None)
    return model


def test_bins_cover_every_length_up_to_the_cap() -> None:
    edges = bin_edges(16384)
    assert edges[0] == 0 and edges[-1] >= 16384
    assert all(b > a for a, b in itertools.pairwise(edges))
    assert len(edges) < 120  # cheap enough to estimate on every dispatch


def test_with_nothing_in_flight_the_estimate_is_the_finished_mean() -> None:
    model = seen(4096, [100] * 10 + [1000] * 10)
    mean, variance, _ = model.survival([]).outlook(0.0)
    assert mean == pytest.approx(550)
    assert variance == pytest.approx(450**2)


def test_no_history_means_the_prior_a_quarter_of_the_cap() -> None:
    """An exponential of a quarter of the cap, cut at the cap: long-tailed, mean under 4,096."""
    mean, variance, _ = SurvivalModel(16384).survival([]).outlook(0.0)
    assert 3500 < mean < 4096
    assert 3000**2 < variance < 4096**2


def test_a_censored_estimate_converges_to_the_true_mean() -> None:
    """Lognormal lengths (mean 1,000, cv 0.95): 2,000 answers back and 150 still running,
    each as far as it has got. The mean of what the running ones will end at is their own
    conditional mean, which the estimate must find within 10%."""
    rng = random.Random(7)
    sigma2 = math.log1p(0.95**2)
    draw = [rng.lognormvariate(math.log(1000) - sigma2 / 2, sigma2**0.5) for _ in range(2150)]
    model = seen(32768, [round(x) for x in draw[:2000]])
    running = draw[2000:]
    produced = [x * rng.random() for x in running]
    law = model.survival(produced)
    assert law.outlook(0.0)[0] == pytest.approx(1000, rel=0.1)
    # The running ones: never short, and long by a bounded margin (a bin's width, and the
    # prior's tail past the last 10 at risk: the safe side, BENCHMARKS.md says what it costs).
    estimate = sum(law.outlook(p)[0] for p in produced)
    assert sum(running) <= estimate <= 1.7 * sum(running)


def test_answers_still_running_raise_the_estimate_above_the_short_ones_back() -> None:
    """The cause of the issue: ten short answers back, ten still running past 500."""
    model = seen(4096, [100] * 10)
    naive = model.survival([]).outlook(0.0)[0]
    law = model.survival([500.0] * 10)
    assert naive == pytest.approx(100)
    assert law.outlook(0.0)[0] > 0.5 * 100 + 0.5 * 500  # half of them are longer than 500
    assert law.outlook(500.0)[0] > 500


def test_an_old_request_is_expected_to_end_long() -> None:
    model = seen(4096, [100] * 90 + [1000] * 10)
    law = model.survival([])
    assert law.outlook(0.0)[0] == pytest.approx(190)
    assert law.outlook(200.0)[0] == pytest.approx(1000)


def test_produced_is_read_from_age_or_a_streamed_count() -> None:
    model = SurvivalModel(4096)
    assert model.produced(5.0) == 0  # nothing back: nothing to go by
    model.observe(2000, 2.1)  # 2000 tokens took 2.1 s
    assert model.produced(1.0) == 0
    assert model.produced(2.5) == 2000  # running longer than it took: at least as long
    assert model.produced(1.0, known=700) == 700  # a stream's own count
    for length in range(100, 1000, 100):
        model.observe(length, 0.1 + length / 1000)
    assert model.produced(3.1) == pytest.approx(3000)  # the latency line: 0.1 s + 1 ms/token


def lane(seconds_per_token: float, fixed_s: float = 0.05) -> LatencyLine:
    line = LatencyLine()
    for length in range(100, 1100, 100):
        line.add(length, fixed_s + length * seconds_per_token)
    return line


def test_a_fleet_request_is_read_by_its_own_lanes_line() -> None:
    """Lanes decode at their own speeds: the dataset's answers came back from a fast API
    (2,000 tok/s), so by its line and its fastest answers a box request (100 tok/s) 10 s
    out had produced 20,000 tokens, past every answer seen, and the budget counted it at
    about the cap: the box ran 1 to 4 of its 8 slots. Its lane's own line says 1,000; 3 s
    out, 300 (the dataset's line: 6,000, past every answer seen)."""
    model = SurvivalModel(32767)
    for length in range(100, 1300):  # 1,200 answers: the prior's spread weighs little
        model.observe(length, 0.05 + length / 2000)
    assert model.produced(10.0) == pytest.approx(19_900)
    assert model.produced(10.0, line=lane(1 / 100)) == pytest.approx(995)
    assert model.produced(10.0, known=1500, line=lane(1 / 100)) == 1500  # a stream's count
    assert model.produced(10.0, line=LatencyLine()) == 0  # a lane with too few answers yet
    inflight = [InFlight(0.0, 32767, line=lane(1 / 100)) for _ in range(7)]
    budget = Budget(400_000)
    assert may_dispatch(BudgetMode.PREDICTIVE, budget, 380_000, 600, inflight, model, 32767, 3.0)
    for request in inflight:
        request.line = None  # read by the fast lane's line: each at about the cap
    assert not may_dispatch(
        BudgetMode.PREDICTIVE, budget, 380_000, 600, inflight, model, 32767, 3.0
    )


def test_the_estimate_is_less_sure_after_fewer_answers() -> None:
    few = seen(4096, [100, 1000] * 5).survival([]).outlook(0.0)[2]
    many = seen(4096, [100, 1000] * 500).survival([]).outlook(0.0)[2]
    assert many < few / 10


def test_the_first_wave_is_sized_by_the_prior_not_the_concurrency() -> None:
    """No history, cap 16384 (prior mean 4096): a 200k budget lets far fewer than 150 go."""
    model = SurvivalModel(16384)
    budget = Budget(200_000)
    count = 0
    while count < 150 and may_dispatch(
        BudgetMode.PRECISE, budget, 0, 0, [InFlight(0.0, 16384)] * count, model, 16384, 0.0
    ):
        count += 1
    assert 1 <= count <= 200_000 / 4096


def first_wave(model: SurvivalModel, budget: int, cap: int = 32768) -> int:
    count = 0
    while count < 150 and may_dispatch(
        BudgetMode.PRECISE, Budget(budget), 0, 0, [InFlight(0.0, cap)] * count, model, cap, 0.0
    ):
        count += 1
    return count


def test_a_resumed_history_sizes_the_first_wave_with_doubt_and_decides_lone_answers() -> None:
    """A history of half the true mean (500 for 1,000) must not send a whole pool of 150 at
    a budget of one pool's volume (150k): in the window it weighed as this run's own answers
    and did (+98K at the 95th percentile in the budget sweep); as a prior of 4x its mean it
    sizes the first wave as the true mean would be sized, and this run's answers take over."""
    history = [500] * 200
    model = SurvivalModel(32768, history)
    assert model.prior_mean == 4 * 500 and model.observed == 0
    assert model.known_mean() == 500, "the panel still shows the history's mean"
    assert first_wave(model, 150_000) < 150 * 1000 / 2000 + 1
    assert first_wave(seen(32768, history), 150_000) == 150, "the history as this run's: all"
    # Nothing in flight: the history decides whether one more answer has room (a top-up of
    # less than that stays done), until this run's first answer is back.
    tailed = SurvivalModel(32768, [500] * 180 + [5000] * 20)  # 95% within 5,000, mean 950
    assert not may_dispatch(BudgetMode.PRECISE, Budget(1000), 700, 7, [], tailed, 32768, 0.0)
    assert may_dispatch(BudgetMode.PRECISE, Budget(5000), 700, 7, [], tailed, 32768, 0.0)
    assert model.lone_basis() is model.history
    model.observe(900, None)
    assert model.lone_basis() is model and model.known_mean() == 900
    # A history longer than the no-history prior leaves that prior as it is.
    assert SurvivalModel(4096, [3000] * 10).prior_mean == 4096 * 0.25


def test_a_window_forgets_old_lengths() -> None:
    model = SurvivalModel(4096)
    model.WINDOW = 4  # type: ignore[misc]
    model._window = []
    for length in [1000] * 4 + [10] * 4:
        model.observe(length, None)
    assert model.mean == pytest.approx(10)


def test_predictive_mode_given_a_window_says_which_model_it_needs() -> None:
    """The modes and their models go together (length_model); a mix-up is a TypeError that
    says so, not an AttributeError from deep inside."""
    inflight = [InFlight(0.0, 1000)] * 4
    with pytest.raises(TypeError, match="predictive and precise modes decide by a Survival"):
        may_dispatch(BudgetMode.PREDICTIVE, Budget(5000), 0, 0, inflight, LengthModel(10), 1000)


def test_an_answer_past_the_cap_ends_at_the_cap_in_the_law() -> None:
    """Issue 29 on a real SGLang server (a 128 cap most answers reach): the tail past every
    answer seen counts what would run past the cap at the cap, as the server ends it; the
    law spread below the cap counted a pool of 31 such answers ~400 tokens short."""
    rng = random.Random(29)
    for low, scale, cap in [
        (100.0, 100.0, 128.0),
        (8.0, 25.6, 128.0),
        (15_000.0, 15_000.0, 32_768.0),
    ]:
        draws = [min(low + rng.expovariate(1.0 / scale), cap) for _ in range(200_000)]
        mean = sum(draws) / len(draws)
        variance = sum((d - mean) ** 2 for d in draws) / len(draws)
        got_mean, got_variance = truncated_exponential(low, scale, cap)
        assert got_mean == pytest.approx(mean, rel=0.01), (low, scale, cap)
        assert got_variance == pytest.approx(variance, rel=0.05), (low, scale, cap)
    assert truncated_exponential(100.0, 100.0, 128.0)[0] > 124  # spread below it: ~114


def test_a_tight_cap_is_the_prior_where_a_quarter_of_it_is_shorter_than_any_dataset() -> None:
    assert SurvivalModel(128).prior_mean == 128
    assert SurvivalModel(1024).prior_mean == 512
    assert SurvivalModel(32768).prior_mean == 32768 * 0.25
