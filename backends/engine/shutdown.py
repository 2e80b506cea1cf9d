"""Ending a run on request: the drain, and the abort past it.

A first stop lets what is in flight finish (each answer cost GPU time and is written once it
is whole) for up to the grace period; a second signal, or the grace running out, cancels the
requests, and a client that can (SGLang's `/abort_request`, fanned out behind a router) also
stops them at the server, so the GPUs are not left generating answers nobody will keep.
"""

from __future__ import annotations

import asyncio
import time

from gen_tui.backends.aio import wait_event
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.runner import RequestRunner
from gen_tui.backends.engine.slots import SlotPool
from gen_tui.backends.figures import counted
from gen_tui.backends.progress.snapshot import DatasetState


class Shutdown(RunPart):
    """Drains the pool after a stop, and aborts what is left in it."""

    def __init__(self, run: RunContext, pool: SlotPool, runner: RequestRunner) -> None:
        super().__init__(run)
        self._pool = pool
        self._runner = runner
        self.aborted = False
        """Whether in-flight requests were aborted (their samples stay undone)."""

    async def drain(self) -> None:
        """Wait for what is in flight, up to the grace period or a second signal; then abort."""
        deadline = time.monotonic() + self.config.grace_s
        for ds in self.datasets:
            if not ds.state.finished and ds.inflight:
                ds.state = DatasetState.DRAINING
        tasks = self._pool.tasks
        if tasks:
            self.reporter.event(
                "info",
                f"stopping: draining {len(tasks)} in-flight requests "
                f"(up to {self.config.grace_s:g} s; signal again to abort them)",
            )
        while tasks and not self.signals.aborting:
            self.signals.wake.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.reporter.event(
                    "warning", "drain grace period over: aborting in-flight requests"
                )
                break
            await wait_event(self.signals.wake, min(remaining, 0.5))
        if tasks:
            await self.abort_inflight()

    async def abort_inflight(self) -> None:
        """Cancel every request task; a client that can also stops them at the server."""
        self.aborted = True
        tasks = self._pool.tasks
        count = len(tasks)
        rids = list(self._runner.active.items())
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._runner.abort(rids)
        self.reporter.event(
            "warning", f"aborted {counted(count, 'in-flight request')} (their samples stay undone)"
        )
