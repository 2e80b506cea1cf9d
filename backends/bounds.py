"""The range each kind of number read from a file, a server or a tool must fall in.

Why: the files, the servers' /metrics and nvidia-smi are written by others (another user's
run, a broken driver, an attacker), and JSON and Prometheus text carry `1e308`, `NaN` and
`inf` as readily as `42`. Unchecked, such a value crashed `report --html` (a time_t
overflow), printed 309-digit walls and dollars, and stretched a plot's axis to 2e+304 h.
Each reader checks a value here, where it reads it, against its kind's range, and keeps
it, or says in one line which field of which file was out of range; nothing further down
meets a number it cannot draw. Each range is said once: the kinds are the constants below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "CELSIUS",
    "COUNT",
    "DOLLARS",
    "FRACTION",
    "GPU_INDEX",
    "MEBIBYTES",
    "PERCENT",
    "PID",
    "RATE",
    "SECONDS",
    "UNIX_TIME",
    "WATTS",
    "Range",
    "shown",
]


def shown(value: object) -> str:
    """`value` as an out-of-range line quotes it: a number in at most 12 characters
    (`1e+308`, `nan`, `-inf`), anything else by its type's name."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return type(value).__name__
    if isinstance(value, int):
        if abs(value) < 10**12:
            return str(value)
        if value.bit_length() > 1000:  # float() of it would raise OverflowError
            return "a huge integer"
    return f"{float(value):.6g}"


@dataclass(frozen=True, slots=True)
class Range:
    """The values one kind of figure can really take, both ends included."""

    what: str
    """How a refusal names the kind: "a Unix time", "a count"."""
    low: float
    high: float

    def check(self, value: object) -> float | None:
        """`value` as a float when it is a number (not a bool) in range, else None."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            return None  # float() of a 400-digit int raises OverflowError
        number = float(value)
        if math.isfinite(number) and self.low <= number <= self.high:
            return number
        return None

    def problem(self, field: str, value: object) -> str:
        """The line an out-of-range `value` of `field` is refused with (after the file)."""
        return f"field {field!r} is out of range ({shown(value)}: not {self.what})"


UNIX_TIME = Range("a Unix time from 1970 to 2286", 0.0, 1e10)
"""A wall-clock moment (a history point's `t`, a record's `created`)."""
COUNT = Range("a count from 0 to 1e18", 0.0, 1e18)
"""Tokens, samples, requests: the budgets' own bound (figures.MAX_COUNT)."""
RATE = Range("a rate from 0 to 1e12 per second", 0.0, 1e12)
"""Tokens per second: a thousand times any real cluster's."""
SECONDS = Range("a duration from 0 to 1e9 s", 0.0, 1e9)
"""A latency or a wall time: some 30 years."""
DOLLARS = Range("dollars from 0 to 1e12", 0.0, 1e12)
FRACTION = Range("a fraction from 0 to 1", 0.0, 1.0)
PERCENT = Range("a percentage from 0 to 100", 0.0, 100.0)
PID = Range("a process id", 0.0, 2.0**31 - 1)
GPU_INDEX = Range("a GPU index from 0 to 1023", 0.0, 1023.0)
MEBIBYTES = Range("GPU memory from 0 to 1e8 MiB", 0.0, 1e8)
"""A GPU's memory: some hundred TiB, a thousand times today's largest."""
WATTS = Range("a power from 0 to 1e5 W", 0.0, 1e5)
CELSIUS = Range("a temperature from 0 to 500 °C", 0.0, 500.0)
