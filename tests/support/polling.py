"""The one way a test waits for something: poll a check until it holds, or fail saying what.

Tests never sleep a fixed time for a condition (that is either slow or flaky under load);
they poll with a deadline. A timeout is an AssertionError that names what was awaited (the
`what` given, else the check's own source line), how long it waited, and, when `detail` is
given, the state that explains it (a process's output, a count): the line a failure report
needs. The async form takes `pause=pilot.pause` under Textual's Pilot, so the app gets to
process its messages and timers between polls.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

INTERVAL_S = 0.05


def describe(check: Callable[[], Any]) -> str:
    """The check's source (a lambda's line), so an unnamed wait still says what it was."""
    try:
        source = " ".join(inspect.getsource(check).split())
    except (OSError, TypeError):
        return repr(check)
    return source if len(source) <= 200 else source[:197] + "..."


def _timed_out(check: Callable[[], Any], timeout: float, what: str | None, detail: Any) -> str:
    message = f"not within {timeout:g} s: {what or describe(check)}"
    if detail is not None:
        message += f"\n{detail()}"
    return message


async def wait_until(
    check: Callable[[], T],
    timeout: float = 30.0,
    what: str | None = None,
    *,
    interval: float = INTERVAL_S,
    pause: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll `check()` every `interval` s until it is truthy and return that value; after
    `timeout` s raise AssertionError naming `what`. An exception from `check` propagates
    (a check may assert that what it waits on is still alive)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(check, timeout, what, detail))
        await pause(interval)


def wait_until_sync(
    check: Callable[[], T],
    timeout: float = 30.0,
    what: str | None = None,
    *,
    interval: float = INTERVAL_S,
    detail: Callable[[], str] | None = None,
) -> T:
    """`wait_until` for tests without an event loop (chaos scenarios driving processes)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(check, timeout, what, detail))
        time.sleep(interval)
