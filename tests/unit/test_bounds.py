"""The ranges of bounds.py and the bounded formatting of figures.py (issue 30, points 6b and
9): a number of any size, NaN or inf is kept only in its kind's range, and any figure drawn
is a few characters."""

from __future__ import annotations

import math

import pytest

from gen_tui.backends.bounds import COUNT, FRACTION, UNIX_TIME, shown
from gen_tui.backends.figures import format_count, format_dollars, format_duration
from gen_tui.backends.store.progress_file import ProgressFile

HOSTILE = [1e308, -1e308, math.inf, -math.inf, math.nan, 10**400, -(10**400), 2**63, True, "1"]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_is_in_no_range(value: object) -> None:
    for bounds in (UNIX_TIME, COUNT, FRACTION):
        assert bounds.check(value) is None
    assert len(shown(value)) <= 14
    problem = UNIX_TIME.problem("t", value)
    assert problem.startswith("field 't' is out of range (") and len(problem) < 100


def test_values_in_range_are_kept_as_floats() -> None:
    assert UNIX_TIME.check(1.7e9) == 1.7e9 and COUNT.check(10**18) == 1e18
    assert FRACTION.check(1) == 1.0 and FRACTION.check(1.01) is None


@pytest.mark.parametrize("value", [1e308, -1e308, math.inf, -math.inf, math.nan, 1e15, 2.0**63])
def test_figures_are_a_few_characters_whatever_the_value(value: float) -> None:
    assert len(format_count(value)) <= 10
    assert len(format_duration(value)) <= 12
    assert len(format_dollars(value)) <= 10
    assert format_count(9_870_000) == "9.87M" and format_dollars(12.3) == "$12.30"


def test_progress_json_figures_out_of_range_are_ignored_by_name() -> None:
    parsed = ProgressFile.parse(
        {"pid": 10**30, "max_tokens": 10**19, "cost": 1e308, "errors": 3, "inflight": -1}
    )
    assert parsed is not None
    assert (parsed.pid, parsed.max_tokens, parsed.cost, parsed.inflight) == (None,) * 4
    assert parsed.errors == 3
    assert set(parsed.ignored) == {"pid", "max_tokens", "cost", "inflight"}
