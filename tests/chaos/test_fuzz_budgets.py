"""Fuzz budget strings (`10M`, `2.5e6`, `500k`, `10_000_000`): the exact whole number, checked
with exact arithmetic, or a CountError naming the flag, each in under a second even for
`1e999999` or 5,000 digits.

Property for each: the real function either returns what an independent oracle
(`oracle.py`) expects, or raises the module's own error type with a message that says where
(file, line, field). Any other exception, or a call that takes seconds, is a defect: it
would reach the user as a traceback or a hang. Example counts follow --chaos-iterations.
"""

from __future__ import annotations

import re
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from gen_tui.backends.figures import CountError, parse_count

from .conftest import Examples
from .fuzzing import timed

count_texts = st.one_of(
    st.text(max_size=16),
    st.from_regex(r"\A\s?[0-9_]{1,8}(\.[0-9_]{0,4})?([eE][+-]?[0-9]{1,7})?\s?[kKmMgGbBtTxX]?\Z"),
    st.sampled_from(
        [
            *("10M", "2.5e6", "500k", "10_000_000", "1e999999", "1e1000000", "9" * 5000),
            *("0e40", "1.000000000000000000000000000001k", "1e18", "1000000000000000001"),
            "2.5e-3k",
        ]
    ),
)


def expected_count(text: str) -> int | None:
    """docs/run.md: `10M`, `2.5e6`, `500k`, `10_000_000`; a whole, non-negative, sane number.

    Exact arithmetic (Fraction), so a rounding shortcut in the parser would show.
    """
    match = re.fullmatch(
        r"\s*([0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE]([+-]?[0-9]+))?\s*([kKmMgGbBtT]?)\s*", text
    )
    if not match or "__" in match.group(1):
        return None
    whole, _, fraction = match.group(1).replace("_", "").partition(".")
    digits = (whole + fraction).lstrip("0")
    exponent = int(match.group(2) or 0) - len(fraction)
    scale = {"": 0, "k": 3, "m": 6, "g": 9, "b": 9, "t": 12}[match.group(3).lower()]
    if not digits:
        return 0
    if len(digits) + exponent + scale > 19:
        return None  # past 1e18, however it is written: refused, never computed
    value = Fraction(int(digits)) * Fraction(10) ** (exponent + scale)
    if value.denominator != 1 or value > 10**18:
        return None
    return int(value)


@given(count_texts)
def test_budget_strings_parse_or_say_why(examples: Examples, text: str) -> None:
    examples()
    try:
        value = timed(parse_count, text, what="--token-budget")
    except CountError as exc:
        assert str(exc).startswith("--token-budget: ")
        assert expected_count(text) is None, f"{text!r} refused: {exc}"
        return
    assert value == expected_count(text), text
