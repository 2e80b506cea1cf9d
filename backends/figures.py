"""The one parser for human-written counts: budgets, sample caps, concurrency.

Budgets are typed by people in flags, config files and the TUI's resume modal ("10M", "2.5e6",
"500k", "10_000_000"); every place that reads one calls :func:`parse_count` so they all accept
and refuse exactly the same strings.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

MAX_COUNT = 10**18
"""No budget is larger. The cap keeps every count a 64-bit integer (progress.json is written by
orjson) and keeps "1e999999" from costing seconds to expand into a million digits."""
_SUFFIX_EXPONENT = {"": 0, "k": 3, "m": 6, "g": 9, "b": 9, "t": 12}
_PATTERN = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGbBtT]?)\s*$")


class CountError(ValueError):
    """A count string that is not a whole, non-negative number."""


def parse_count(text: str | int, *, what: str = "count") -> int:
    """Return the whole number `text` denotes, or raise :class:`CountError` saying why.

    Accepts plain integers with optional `_` separators, decimals and exponents, and the
    suffixes k, M, G/B, T (case-insensitive). The result must be a whole number: "2.5k" is
    2500, "1.0001k" is refused rather than rounded. It must be at most 1e18.
    """
    too_large = CountError(f"{what}: {text!r} is too large (at most 1e18)")
    if isinstance(text, bool):
        raise CountError(f"{what}: expected a number, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise CountError(f"{what}: must not be negative, got {text}")
        if text > MAX_COUNT:
            raise too_large
        return text
    if not isinstance(text, str):
        raise CountError(f"{what}: expected a number like 10M, 2.5e6 or 500k, got {text!r}")
    if text.strip().startswith("-"):
        raise CountError(f"{what}: {text!r} is negative; it must be a positive count like 10M")
    match = _PATTERN.match(text)
    if not match or match.group(1).startswith("_") or "__" in match.group(1):
        raise CountError(f"{what}: {text!r} is not a number (try 10M, 2.5e6, 500k or 10_000_000)")
    mantissa, suffix = match.groups()
    try:
        number = Decimal(mantissa.replace("_", ""))
    except InvalidOperation as exc:
        raise CountError(f"{what}: {text!r} is not a number") from exc
    if not number:
        return 0
    if number.adjusted() > 18:
        raise too_large  # before any arithmetic: the exponent alone may be a million
    # Exact, on the digits: Decimal arithmetic rounds (to 28 digits) and underflows
    # ("1e-2000000" to 0), and either would turn a fraction into a whole number.
    _, figures, exponent = number.as_tuple()
    digits = "".join(map(str, figures))
    power = int(exponent) + _SUFFIX_EXPONENT[suffix.lower()]
    if power < 0:
        if -power > len(digits) or digits[power:].strip("0"):
            raise CountError(f"{what}: {text!r} is not a whole number")
        digits = digits[:power]
        power = 0
    value: int = int(digits) * 10**power  # power >= 0 here: an int (typeshed says Any)
    if value > MAX_COUNT:
        raise too_large
    return value


SHOWN_MAX = 1e15
"""Past this a figure is shown in exponent form (`1e+308`): a number from a file or a server
that passed no range check (see bounds.py) still draws in a few characters, never 300."""


def counted(count: int, word: str) -> str:
    """`1 sample`, `2 samples`, `1,389 samples`: a count as a line says it, with its
    thousands separated and its noun agreeing (`word` is the singular; an `s` makes the
    plural, and `es` after a sibilant: `2 batches`)."""
    if count == 1:
        return f"{count:,} {word}"
    return f"{count:,} {word}{'es' if word.endswith(('ch', 'sh', 'ss', 'x')) else 's'}"


def format_count(value: float, digits: int | None = None) -> str:
    """Short human form used in logs and panels: 9.87M, 512k, 950 (at most 10 characters:
    `?` for NaN and infinities, `1.2e+20` past SHOWN_MAX).

    `digits`: at most that many significant digits once scaled (3: 931.88k is 932k, 10.62M
    is 10.6M), for a line too narrow for two decimals; a count under 1,000 stays whole.
    """
    if not math.isfinite(value):
        return "?"
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value >= SHOWN_MAX:
        return f"{sign}{value:.2g}"
    for scale, suffix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k")):
        if value >= scale:
            scaled = value / scale
            places = 2 if digits is None else max(0, digits - len(str(int(scaled))))
            shown = f"{scaled:.{places}f}"
            if "." in shown:
                shown = shown.rstrip("0").rstrip(".")
            return f"{sign}{shown}{suffix}"
    return f"{sign}{int(value)}"


def format_duration(seconds: float | None) -> str:
    """`3d04h`, `2h05m`, `4m10s`, `9s` (`?` for NaN and infinities; past some 30 years, days
    in exponent form: a time from a hostile file never draws 300 digits)."""
    if seconds is None:
        return "-"
    if not math.isfinite(seconds):
        return "?"
    if abs(seconds) >= 1e9:
        return f"{seconds / 86400:.2g}d"
    seconds = int(seconds)
    if seconds >= 86400:
        return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def format_dollars(amount: float) -> str:
    """`$0.042`, `$12.30`, `$1,234`: cents matter below a hundred dollars, not above
    (`$?` for NaN and infinities, `$1.2e+20` past a billion: bounded whatever the file)."""
    if not math.isfinite(amount):
        return "$?"
    if abs(amount) >= 1e9:
        return f"${amount:.2g}"
    if amount < 1:
        return f"${amount:.3f}"
    if amount < 100:
        return f"${amount:.2f}"
    return f"${amount:,.0f}"
