"""`--lane`: one server of a mixed fleet, with its own API, price and concurrency (issue 34).

Spelt `NAME=URL[,api=openai][,price=IN/OUT][,concurrency=N][,turnaround=D]`, as a flag
(repeated) or as `[run] lanes = ["box=http://gpu:30000", "api=https://...,api=openai"]`.
A lane without a price is free (the box); `price` is dollars per million input/output
tokens, as `--price` (a server that reports usage.cost is charged that instead).

A batch lane (`api=openai-batch`, issue 33 as a lane of issue 34's fleet) sends its share
as batches through the OpenAI Batch contract; its `price` is what the batch tokens cost
(the provider's batch price, not the live one), and `turnaround=DURATION` is how long a
batch is expected to take until one has come back (then its observed turnaround counts).
A run has one batch lane at most: a batch lives at the provider that created it, and the
dataset's journal names no URL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gen_tui.backends.plan.deadline import DeadlineError, parse_deadline

APIS = ("sglang", "openai", "openai-batch")
BATCH_API = "openai-batch"
SGLANG_API = "sglang"
"""The native API, the one a lane names without `api=`: an SGLang server and its /metrics."""
DEFAULT_TURNAROUND_S = 24 * 3600.0
"""A batch lane's turnaround until one of its batches has come back: the providers' window
(24 h), so nothing is planned on it that it may not deliver; `turnaround=` says better."""
_USAGE = "NAME=URL[,api=sglang|openai|openai-batch][,price=IN/OUT][,concurrency=N][,turnaround=D]"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


@dataclass(frozen=True)
class LaneSpec:
    name: str
    url: str
    api: str = SGLANG_API
    price_per_million: tuple[float, float] = (0.0, 0.0)
    concurrency: int | None = None
    """Requests in flight on this lane; None: the run's --concurrency."""
    turnaround_s: float | None = None
    """A batch lane's expected turnaround before one is observed (None: the 24 h window)."""

    @property
    def batch(self) -> bool:
        """Whether it sends batches (the batch lane) rather than live requests."""
        return self.api == BATCH_API

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
            f"{text!r}: expected {_USAGE} (NAME a word, URL with its http:// or https://)"
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
        elif key == "turnaround" and _duration(value) is not None:
            fields["turnaround_s"] = _duration(value)
        else:
            raise ValueError(
                f"{text!r}: {option!r} is not api=sglang|openai|openai-batch, price=IN/OUT "
                "(dollars per million), concurrency=N (at least 1) or turnaround=DURATION "
                "(30m, 2h)"
            )
    spec = LaneSpec(**fields)
    if spec.turnaround_s is not None and not spec.batch:
        raise ValueError(f"{text!r}: turnaround= is for a batch lane (api=openai-batch)")
    return spec


def _duration(value: str) -> float | None:
    """`turnaround=`'s duration in seconds (a time of day means nothing here); None if bad."""
    if ":" in value:
        return None
    try:
        return parse_deadline(value)
    except DeadlineError:
        return None


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
    batch = [lane.name for lane in lanes if lane.batch]
    if len(batch) > 1:
        raise ValueError(
            f"lanes {' and '.join(batch)} are both api=openai-batch: a run takes one batch lane "
            "(a batch lives at the provider that created it; run one gen-tui per provider)"
        )
    if batch and len(batch) == len(lanes):
        raise ValueError(
            f"lane {batch[0]} is the only lane and a batch one: use --api openai-batch "
            "--server-url URL for a batch-only run"
        )
    return lanes
