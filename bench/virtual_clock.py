"""A virtual clock for the real Engine: hours of requests in seconds, timing kept exact.

The event loop's clock jumps to its next timer whenever nothing is ready, instead of
sleeping until it; the engine's `time.monotonic()` reads that clock. Work handed to a
thread (reading prompts, fsync) still takes real time and no virtual time: while any is
pending the loop waits for it for real, so a jump never overtakes an answer being written.
What is simulated is only the server: each answer arrives after `length / tok_s` virtual
seconds, so long answers come back later, as they do from a real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import sys
import time
from collections.abc import Iterator
from typing import Any


class _Selector:
    """The loop's selector, but a wait with a timeout and nothing pending moves the clock."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        self.real = selectors.DefaultSelector()
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def select(self, timeout: float | None = None) -> list[Any]:
        events = self.real.select(0)
        if events or timeout == 0:
            return events
        if self.loop.pending or timeout is None:
            return self.real.select(None if self.loop.pending else timeout)
        self.loop.now += timeout
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 0.0
        self.pending = 0
        super().__init__(_Selector(self))  # type: ignore[arg-type]

    def time(self) -> float:
        return self.now

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:
        future = super().run_in_executor(executor, func, *args)
        self.pending += 1
        future.add_done_callback(self._one_less)
        return future

    def _one_less(self, _: object) -> None:
        self.pending -= 1


class _Clock:
    """Stands in for the `time` module inside gen_tui: `monotonic` is the loop's clock."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        self.loop = loop

    def monotonic(self) -> float:
        return self.loop.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextlib.contextmanager
def virtual_time(loop: VirtualClockLoop) -> Iterator[None]:
    """Point every gen_tui module's `time` at `loop`'s clock for the duration."""
    patched = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("gen_tui.") and getattr(module, "time", None) is time
    ]
    clock = _Clock(loop)
    for module in patched:
        module.time = clock  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in patched:
            module.time = time  # type: ignore[attr-defined]


def run_virtual(coro: Any) -> Any:
    """Run `coro` to completion on a fresh virtual-clock loop."""
    loop = VirtualClockLoop()
    try:
        with virtual_time(loop):
            return loop.run_until_complete(coro)
    finally:
        loop.close()
