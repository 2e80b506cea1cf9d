import pytest

from gen_tui.backends.budget.rules import (
    TAPER_Z,
    Budget,
    BudgetMode,
    InFlight,
    LengthModel,
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


def test_predictive_counts_expected_inflight_and_the_new_request() -> None:
    budget = Budget(max_tokens=1000)
    model = LengthModel(100, [100] * 40)
    eight = [InFlight(0.0, 500)] * 8
    assert may_dispatch(BudgetMode.PREDICTIVE, budget, 0, 0, eight, model, 500, 0.0)
    nine = [InFlight(0.0, 500)] * 9
    assert not may_dispatch(BudgetMode.PREDICTIVE, budget, 0, 0, nine, model, 500, 0.0)
    assert may_dispatch(BudgetMode.PREDICTIVE, budget, 999, 0, [], model, 500, 0.0)


def test_predictive_keeps_a_margin_for_spread() -> None:
    budget = Budget(max_tokens=1000)
    steady = LengthModel(100, [100] * 40)
    spread = LengthModel(100, [0, 200] * 20)
    assert steady.mean == spread.mean == 100

    def most_in_flight(model: LengthModel) -> int:
        count = 0
        while may_dispatch(
            BudgetMode.PREDICTIVE, budget, 0, 0, [InFlight(0.0, 500)] * count, model, 500, 0.0
        ):
            count += 1
        return count

    assert most_in_flight(steady) == 9

    def fits(count: int) -> bool:
        variance = count * 100**2 + count * count * 100**2 / 40
        return count * 100 + TAPER_Z * variance**0.5 < 1000

    expected = max(n for n in range(10) if fits(n + 1)) + 1
    assert most_in_flight(spread) == expected < 9


def test_predictive_is_wary_of_the_first_short_answers() -> None:
    budget = Budget(max_tokens=10_000)

    def most_in_flight(model: LengthModel) -> int:
        count = 0
        while may_dispatch(
            BudgetMode.PREDICTIVE, budget, 0, 0, [InFlight(0.0, 1000)] * count, model, 1000, 0.0
        ):
            count += 1
        return count

    early = most_in_flight(LengthModel(1000, [100, 120, 90]))
    settled = most_in_flight(LengthModel(1000, [100, 120, 90] * 20))
    assert early < settled / 2


def test_predictive_expects_more_of_old_requests() -> None:
    model = LengthModel(100)
    for length in [10] * 90 + [1000] * 10:
        model.observe(length, 0.2 + length / 100.0)
    assert model.outlook(0.0)[0] == model.mean
    assert model.latency_line() == pytest.approx((0.2, 0.01))
    assert model.outlook(0.1)[0] == model.mean
    assert model.outlook(0.7)[0] == 1000


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
