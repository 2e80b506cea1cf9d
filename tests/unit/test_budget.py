import pytest

from gen_tui.backends.budget.expected import ExpectedLengths
from gen_tui.backends.budget.lengths import SurvivalModel
from gen_tui.backends.budget.rules import (
    Budget,
    BudgetMode,
    InFlight,
    LengthModel,
    length_model,
    may_dispatch,
    room_for_one,
    share_total,
)


def test_drain_dispatches_until_committed_reaches_budget() -> None:
    budget = Budget(max_tokens=1000)
    model = LengthModel(100)
    many = [InFlight(0.0, 100)] * 50
    assert may_dispatch(BudgetMode.DRAIN, budget, 999, 0, many, model, 100)
    assert not may_dispatch(BudgetMode.DRAIN, budget, 1000, 0, [], model, 100)


def survival(lengths: list[int], cap: int = 500) -> SurvivalModel:
    """A predictive or precise dataset's model after `lengths` came back (0.01 s a token)."""
    model = SurvivalModel(cap)
    for length in lengths:
        model.observe(length, 0.01 * length)
    return model


def most_in_flight(mode: BudgetMode, model: SurvivalModel, budget: int, cap: int) -> int:
    """How many fresh requests `mode` keeps in flight under `budget` with nothing on disk."""
    count = 0
    while count < 1000 and may_dispatch(
        mode, Budget(budget), 0, 0, [InFlight(0.0, cap)] * count, model, cap, 0.0
    ):
        count += 1
    return count


def test_predictive_always_crosses_where_precise_may_stop_short() -> None:
    """With nothing in flight predictive sends one more however little room is left: the
    crossing is the moment a user watches for. Precise stops short instead."""
    model = survival([50, 100, 400] * 70)
    assert may_dispatch(BudgetMode.PREDICTIVE, Budget(1000), 999, 0, [], model, 500, 0.0)
    assert not may_dispatch(BudgetMode.PRECISE, Budget(1000), 999, 0, [], model, 500, 0.0)


def test_predictive_tapers_by_what_is_in_flight_with_a_narrower_margin_than_precise() -> None:
    """Both keep a high estimate of what is in flight under the budget (issue 29); precise's
    margin is the wider, so predictive keeps more in flight, and neither all 1000."""
    model = survival([80, 100, 120] * 60)
    predictive = most_in_flight(BudgetMode.PREDICTIVE, model, 10_000, 500)
    precise = most_in_flight(BudgetMode.PRECISE, model, 10_000, 500)
    assert precise < predictive < 100
    assert predictive > 60  # a steady 100-token answer: most of the 100 that fit


def test_predictive_is_wary_of_long_answers_still_running() -> None:
    """What is in flight is the long answers (the short came back first): predictive counts a
    request by what it has already produced, never at the mean of those back. Issue 29's
    cause: counted at that mean, a budget of a few pools ended 20 to 70 allowances past."""
    model = survival([50] * 100 + [400] * 20, cap=500)
    fresh = [InFlight(0.0, 500)] * 40
    old = [InFlight(0.0, 500, produced=350)] * 40
    budget = Budget(10_000)
    assert may_dispatch(BudgetMode.PREDICTIVE, budget, 0, 0, fresh, model, 500, 0.0)
    assert not may_dispatch(BudgetMode.PREDICTIVE, budget, 0, 0, old, model, 500, 0.0)


def test_predictive_sizes_its_first_wave_by_the_cap_before_any_answer_is_back() -> None:
    """No answer back: every one in flight may run to its cap (budget/expected.py's prior),
    so issue 29's 4,000 budget at a cap of 128 sends 31, not a pool of 128."""
    expected = ExpectedLengths(128)
    count = 0
    while count < 128 and may_dispatch(
        BudgetMode.PREDICTIVE,
        Budget(4000),
        0,
        0,
        [InFlight(0.0, 128)] * count,
        SurvivalModel(128),
        128,
        0.0,
        expected,
    ):
        count += 1
    assert count == 4000 // 128


def test_drain_and_strict_keep_the_window_model() -> None:
    model = LengthModel(100)
    for length in [10] * 90 + [1000] * 10:
        model.observe(length, 0.2 + length / 100.0)
    assert model.outlook(0.0)[0] == model.mean
    assert model.latency_line() == pytest.approx((0.2, 0.01))
    assert model.outlook(0.1)[0] == model.mean
    assert model.outlook(0.7)[0] == 1000
    assert isinstance(length_model(BudgetMode.DRAIN, 100), LengthModel)
    assert isinstance(length_model(BudgetMode.PREDICTIVE, 100), SurvivalModel)


def test_strict_reserves_max_new_tokens() -> None:
    budget = Budget(max_tokens=1000)
    model = LengthModel(10, [10] * 10)
    assert may_dispatch(BudgetMode.STRICT, budget, 0, 0, [InFlight(0.0, 300)] * 2, model, 300)
    assert not may_dispatch(BudgetMode.STRICT, budget, 0, 0, [InFlight(0.0, 300)] * 3, model, 300)
    assert not may_dispatch(BudgetMode.STRICT, budget, 701, 0, [], model, 300)


def test_max_samples_counts_inflight() -> None:
    budget = Budget(max_samples=5)
    model = LengthModel(10)
    assert may_dispatch(BudgetMode.DRAIN, budget, 0, 3, [InFlight(0.0, 1)], model, 1)
    assert not may_dispatch(BudgetMode.DRAIN, budget, 0, 3, [InFlight(0.0, 1)] * 2, model, 1)


def test_total_budget_is_split_by_weight() -> None:
    weights = {"a": 1.0, "b": 1.0, "c": 2.0}
    assert share_total(92_000_000, weights, {}, {}) == {
        "a": 23_000_000,
        "b": 23_000_000,
        "c": 46_000_000,
    }


def test_a_short_or_capped_dataset_hands_its_share_on() -> None:
    weights = {"a": 1.0, "b": 1.0, "c": 1.0}
    shares = share_total(90, weights, {}, {"a": 10})
    assert shares == {"a": 10, "b": 40, "c": 40}
    shares = share_total(90, weights, {"b": 5, "c": None}, {"a": 10})
    assert shares == {"a": 10, "b": 5, "c": 75}
    assert sum(share_total(100, weights, {}, {})[k] for k in weights) <= 100


def test_a_grown_share_wakes_a_finished_dataset_only_with_room_for_an_answer() -> None:
    model = LengthModel(prior_mean=500)
    for mode in (BudgetMode.PREDICTIVE, BudgetMode.DRAIN):
        assert room_for_one(mode, Budget(10_500), 10_000, 20, model, 4096)
        assert not room_for_one(mode, Budget(10_499), 10_000, 20, model, 4096)
    assert not room_for_one(BudgetMode.STRICT, Budget(14_000), 10_000, 20, model, 4096)
    assert room_for_one(BudgetMode.STRICT, Budget(14_096), 10_000, 20, model, 4096)
    assert not room_for_one(BudgetMode.PREDICTIVE, Budget(20_000, 20), 10_000, 20, model, 4096)
    assert room_for_one(BudgetMode.PREDICTIVE, Budget(None, 21), 10_000, 20, model, 4096)
