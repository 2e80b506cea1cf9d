"""The chaos suite's knobs: how many iterations, how many fuzz examples, where figures go.

Why knobs at all: CI runs every scenario in its seconds-long form as part of the normal
`pytest` run, and RELIABILITY.md is filled from a long run of the same tests. One number,
`--chaos-iterations N` (or the `CHAOS_ITERATIONS` environment variable, which also works
when the option is not registered because pytest was started on `tests/` rather than
`tests/chaos`), scales every scenario: kill cycles, churn rounds and fuzz examples.
`CHAOS_REPORT=FILE` appends each scenario's figures to FILE as JSON lines.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

DEFAULT_ITERATIONS = 1
FUZZ_EXAMPLES_PER_ITERATION = 25


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--chaos-iterations",
        type=int,
        default=None,
        help=f"scale of the chaos suite (default ${{CHAOS_ITERATIONS}} or {DEFAULT_ITERATIONS})",
    )


def iterations_from(config: pytest.Config) -> int:
    """The option if given, else CHAOS_ITERATIONS, else the short CI default."""
    value = config.getoption("chaos_iterations", default=None)
    if value is None:
        value = int(os.environ.get("CHAOS_ITERATIONS", DEFAULT_ITERATIONS))
    if value < 1:
        raise pytest.UsageError("--chaos-iterations must be at least 1")
    return value


def pytest_configure(config: pytest.Config) -> None:
    # Fuzz examples grow with the iterations; no example database, so a run leaves no files
    # behind and every run draws fresh inputs (the seed is printed on failure to replay it).
    examples = FUZZ_EXAMPLES_PER_ITERATION * iterations_from(config)
    settings.register_profile(
        "chaos",
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        print_blob=True,
    )
    settings.load_profile("chaos")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A long run needs more than the suite-wide 120 s timeout; scale it with the iterations."""
    here = Path(__file__).parent
    scale = iterations_from(config)
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.timeout(120 + 90 * scale))


@pytest.fixture(scope="session")
def chaos_iterations(pytestconfig: pytest.Config) -> int:
    return iterations_from(pytestconfig)


@pytest.fixture
def chaos_report(request: pytest.FixtureRequest) -> Callable[..., None]:
    """Record a scenario's figures: printed always, appended to $CHAOS_REPORT when set."""

    def record(**figures: Any) -> None:
        row = {"test": request.node.nodeid, "time": round(time.time()), **figures}
        line = json.dumps(row, sort_keys=True)
        print(f"CHAOS {line}")
        target = os.environ.get("CHAOS_REPORT")
        if target:
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    return record


_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


class Examples:
    """How many inputs a property test was given (hypothesis runs them inside one call)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> None:
        self.n += 1


@pytest.fixture
def examples(
    request: pytest.FixtureRequest, chaos_report: Callable[..., None]
) -> Iterator[Examples]:
    """Count a fuzz test's inputs; report them (only when the test passed) for the figures."""
    count = Examples()
    yield count
    if request.node.stash.get(_PASSED, False):
        chaos_report(scenario=f"fuzz: {request.node.originalname}", examples=count.n)
