"""`--lane`: one server of a mixed fleet, with its own API, price and concurrency (issue 34).

Spelt `NAME=URL[,api=openai][,price=IN/OUT][,concurrency=N]`, as a flag (repeated) or as
`[run] lanes = ["box=http://gpu:30000", "api=https://openrouter.ai/api,api=openai,..."]`.
A lane without a price is free (the box); `price` is dollars per million input/output
tokens, as `--price` (a server that reports usage.cost is charged that instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

APIS = ("sglang", "openai")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


@dataclass(frozen=True)
class LaneSpec:
    name: str
    url: str
    api: str = "sglang"
    price_per_million: tuple[float, float] = (0.0, 0.0)
    concurrency: int | None = None
    """Requests in flight on this lane; None: the run's --concurrency."""

    @property
    def price_per_token(self) -> float:
        """Dollars per completion token, as the planner prices a lane (input is not
        planned: its share of the cost is the prompts', the same on every lane)."""
        return self.price_per_million[1] / 1e6


def parse_lane(text: str) -> LaneSpec:
    """One `--lane` value; raise ValueError saying what was expected."""
    head, *options = text.strip().split(",")
    name, eq, url = head.partition("=")
    if not eq or not _NAME.fullmatch(name) or "://" not in url:
        raise ValueError(
            f"{text!r}: expected NAME=URL[,api=openai][,price=IN/OUT][,concurrency=N] "
            "(NAME a word, URL with its http:// or https://)"
        )
    fields: dict[str, Any] = {"name": name, "url": url.rstrip("/")}
    for option in options:
        key, eq, value = option.partition("=")
        if key == "api" and value in APIS:
            fields["api"] = value
        elif key == "price" and re.fullmatch(r"\d+(\.\d*)?/\d+(\.\d*)?", value):
            given, out = value.split("/")
            fields["price_per_million"] = (float(given), float(out))
        elif key == "concurrency" and value.isdigit() and int(value) >= 1:
            fields["concurrency"] = int(value)
        else:
            raise ValueError(
                f"{text!r}: {option!r} is not api=sglang|openai, price=IN/OUT (dollars per "
                "million) or concurrency=N (at least 1)"
            )
    return LaneSpec(**fields)


def parse_lanes(values: list[Any]) -> list[LaneSpec]:
    """Every lane of a run, each name once; raise ValueError naming the bad one."""
    lanes = []
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"{value!r}: a lane is one string, NAME=URL[,...]")
        lanes.append(parse_lane(value))
    names = [lane.name for lane in lanes]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"lane {', '.join(repeated)} given twice: each lane needs its own name")
    return lanes
