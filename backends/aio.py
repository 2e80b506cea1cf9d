"""Timeouts that never swallow a cancellation.

On Python 3.11, `asyncio.wait_for` returns the inner result when a cancel arrives in the
same loop iteration as that result, and the cancel is lost (fixed in 3.12). In a loop that
reads lines or sleeps between polls, a lost cancel means a task that never ends, and an
`asyncio.run` that never returns (seen: the app hung on exit, its host watcher still
reading heartbeats). These helpers use `asyncio.wait`, which always re-raises the cancel.

The same loss comes from the usual way of stopping a helper task,
`task.cancel(); with suppress(CancelledError): await task`: a cancel of the *caller* that
arrives while it waits is taken for the helper's own and swallowed (seen: a host monitor
cancelled while it replaced its watch stream surveyed on for ever, and `q` waited on it).
`stop` waits with `asyncio.wait`, which leaves the caller's cancel to propagate.

And a child process asyncio started is ended with `kill_child`, never its own `kill()`:
that goes through `Popen.send_signal`, whose `poll()` reaps a child that has just exited
before asyncio's child watcher does; the watcher then logs "Unknown child process pid N,
will report returncode 255" (seen: `gen-tui servers stop`, 1 try in 3, its signal script
killed as it ended on its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], timeout: float | None) -> T:
    """`awaitable`'s result, or TimeoutError after `timeout` seconds (it is then cancelled)."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:
        task.cancel()
        raise
    if not done:
        await stop(task)
        raise TimeoutError
    return task.result()


async def stop(task: asyncio.Future[Any] | None) -> None:
    """Cancel `task` and wait until it has ended, whatever it ends with (its error is
    retrieved, so none is logged as never retrieved); a cancel of the caller while it
    waits still propagates."""
    if task is None:
        return
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until `event` is set or `timeout` passes; True if it was set."""
    with contextlib.suppress(TimeoutError):
        await within(event.wait(), timeout)
    return event.is_set()


def kill_child(process: asyncio.subprocess.Process) -> None:
    """SIGKILL `process` (a child asyncio started) unless it has ended already, without
    reaping it: asyncio's child watcher reaps it and `process.wait()` then returns."""
    if process.returncode is not None:
        return
    try:  # WNOWAIT: looked at, left for the watcher to collect
        ended = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return  # collected already: its return code is on its way to `process`
    if ended is None:  # still running: its pid is its own until it is collected
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
