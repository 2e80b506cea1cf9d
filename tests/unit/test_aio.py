"""Stopping a helper task never swallows a cancel of the one stopping it.

Why: `task.cancel(); with suppress(CancelledError): await task` takes a cancel of the caller,
arriving while it waits, for the helper's own. A host monitor cancelled while it replaced its
watch stream then surveyed on for ever (CI: a test hung 120 s on `await monitor_task`).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from gen_tui.backends.aio import stop, within


def _slow_to_stop(released: asyncio.Event, stopping: asyncio.Event) -> asyncio.Task[None]:
    """A helper that, once cancelled, takes until `released` to end (a channel closing)."""

    async def helper() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopping.set()
            await released.wait()

    return asyncio.create_task(helper())


async def test_a_cancel_of_the_caller_while_it_stops_a_helper_still_ends_the_caller() -> None:
    released, stopping = asyncio.Event(), asyncio.Event()
    helper = _slow_to_stop(released, stopping)
    laps = 0

    async def caller() -> None:  # the monitor's loop: stop the old helper, go on surveying
        nonlocal laps
        await asyncio.sleep(0)
        await stop(helper)
        while True:
            laps += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(caller())
    await asyncio.wait_for(stopping.wait(), 5)
    task.cancel()  # arrives while the caller waits on the helper
    released.set()
    done, _ = await asyncio.wait({task}, timeout=5)
    assert done and task.cancelled() and laps == 0
    assert helper.done()


async def test_stop_waits_for_the_helper_and_keeps_its_error_quiet() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            raise ValueError("closing failed")

    helper = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    await stop(helper)
    await stop(None)
    assert helper.done() and isinstance(helper.exception(), ValueError)


async def test_within_times_out_and_a_cancel_during_its_cleanup_propagates() -> None:
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)
    released, stopping = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopping.set()
            await released.wait()

    task = asyncio.create_task(within(slow(), 0.01))
    await asyncio.wait_for(stopping.wait(), 5)
    task.cancel()
    released.set()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait({task}, timeout=5)
    assert task.cancelled()


def test_no_module_of_the_product_uses_wait_for() -> None:
    """On 3.11 `asyncio.wait_for` loses a cancel that lands with the result (aio's docstring);
    the product's timeouts go through `within`."""
    root = Path(__file__).resolve().parents[2]
    users = [
        str(path.relative_to(root))
        for package in ("app", "backends", "widgets")
        for path in (root / package).rglob("*.py")
        if "asyncio.wait_for(" in path.read_text(encoding="utf-8")
    ]
    assert users == []
