"""The decode batch: each request's life on the server (`Job`) and FIFO admission to the
batch slots (`Slots`), which is what makes the simulator queue and pace work like a GPU
server whose running-request limit is `SimConfig.slots`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

from gen_tui.backends.sim.completion import Prompt, plan
from gen_tui.backends.sim.config import SimConfig, SimStats

__all__ = ["Job", "Slots"]


class Job:
    """One prompt's life on the server: queued, decoding in a slot, then done."""

    def __init__(self, prompt: Prompt, received: float) -> None:
        self.prompt = prompt
        self.rid = prompt.rid
        self.received = received
        self.abort_event = asyncio.Event()
        self.waiter: asyncio.Future[bool] | None = None
        self.state = "new"
        self.decode_start = 0.0
        self.free_at: float | None = None
        """When the model says its slot came free (its last token's time), if it ran out."""
        self.tokens_per_s = 1.0
        self.output_ids: list[int] = []
        self.finish_reason: dict[str, Any] = {}
        self.settled = False

    @property
    def aborted(self) -> bool:
        return self.abort_event.is_set()

    def produced(self, now: float) -> int:
        """Tokens decoded by `now`, which is what an aborted request hands back."""
        if self.state != "running":
            return 0
        decoded = int((now - self.decode_start) * self.tokens_per_s)
        return min(len(self.output_ids), max(0, decoded))

    async def sleep_until(self, deadline: float) -> bool:
        """Sleep until `deadline` unless aborted first; True means aborted."""
        if self.abort_event.is_set():
            return True
        delay = deadline - asyncio.get_running_loop().time()
        if delay <= 0:
            return False
        try:
            async with asyncio.timeout(delay):
                await self.abort_event.wait()
        except TimeoutError:
            return self.abort_event.is_set()
        return True

    def reason(self, produced: int) -> dict[str, Any]:
        if self.state == "aborted_in_queue":
            return _abort_reason("Abort in waiting queue")
        if self.aborted and produced < len(self.output_ids):
            return _abort_reason("Aborted")
        return self.finish_reason


def _abort_reason(message: str) -> dict[str, Any]:
    """SGLang's FINISH_ABORT for a user abort: no status code, so clients can tell it from the
    scheduler's own 4xx/5xx aborts."""
    return {"type": "abort", "message": message, "status_code": None, "err_type": None}


class Served(Protocol):
    """What the slots read and count of the simulator they serve (`pipeline.Simulator`)."""

    config: SimConfig
    stats: SimStats
    jobs: dict[str, set[Job]]


class Slots:
    """FIFO admission to the batch slots.

    Not an asyncio.Semaphore because the capacity follows `config.slots` live and because an
    abort must be able to pull a request out of the queue with a clean "not admitted" answer.
    """

    def __init__(self, sim: Served) -> None:
        self._sim = sim
        self._waiting: deque[Job] = deque()

    async def acquire(self, job: Job) -> bool:
        """Wait for a slot; False when the job was aborted before it got one."""
        if job.aborted:
            job.state = "aborted_in_queue"
            return False
        stats = self._sim.stats
        if not self._waiting and stats.in_flight < self._sim.config.slots:
            self._admit(job)
            return True
        job.waiter = asyncio.get_running_loop().create_future()
        job.state = "queued"
        self._waiting.append(job)
        stats.queued += 1
        try:
            return await job.waiter
        except asyncio.CancelledError:
            self._leave_queue(job, "done")
            raise

    def withdraw(self, job: Job) -> None:
        if job.state == "queued" and job.waiter is not None and not job.waiter.done():
            self._leave_queue(job, "aborted_in_queue")
            job.waiter.set_result(False)

    def release(self, job: Job) -> None:
        if job.state == "running":
            now = asyncio.get_running_loop().time()
            self._sim.stats.generated_tokens += job.produced(now)
            self._sim.stats.in_flight -= 1
            job.state = "done"
            self.wake(now if job.free_at is None else min(now, job.free_at))
        elif job.state == "queued":
            self._leave_queue(job, "done")

    def wake(self, free_at: float | None = None) -> None:
        """Admit queued jobs into free slots.

        `free_at` is when the model freed the slot: the next job decodes from then (or from
        its own arrival, if later), not from whenever this process got round to it. Under
        load the event loop is late by milliseconds per request; counted as idle slot time,
        that lag would make the simulated capacity fall short of slots x tokens/s.
        """
        stats = self._sim.stats
        while self._waiting and stats.in_flight < self._sim.config.slots:
            job = self._waiting.popleft()
            stats.queued -= 1
            job.state = "done"
            if job.waiter is not None and not job.waiter.done():
                self._admit(job, free_at)
                job.waiter.set_result(True)

    def _kv_share(self, job: Job) -> float:
        """The share of its decode speed a newly admitted job gets from the KV cache.

        SGLang admits on the KV its requests hold now and retracts (frees a request, to be
        recomputed later) when their growth no longer fits. Here the batch's need is what its
        requests will hold at their ends, this job included: within `kv_tokens` nothing is
        lost; past it the admission costs a retraction, and the recomputed work makes this
        job slower by the square of the overcommit, so that past the point where the KV
        cache is full, more requests in flight give fewer tokens a second: a real optimum.
        """
        capacity = self._sim.config.kv_tokens
        if capacity is None:
            return 1.0
        need = sum(
            other.prompt.prompt_tokens + len(other.output_ids)
            for peers in self._sim.jobs.values()
            for other in peers
            if other.state == "running"
        )
        if need <= capacity:
            return 1.0
        self._sim.stats.retracted += 1
        return (capacity / need) ** 2

    def _leave_queue(self, job: Job, state: str) -> None:
        if job.state == "queued":
            self._waiting.remove(job)
            self._sim.stats.queued -= 1
            job.state = state

    def _admit(self, job: Job, free_at: float | None = None) -> None:
        config = self._sim.config
        stats = self._sim.stats
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        job.state = "running"
        job.output_ids, job.finish_reason = plan(config, job.prompt)
        job.tokens_per_s = config.tokens_per_s * self._kv_share(job)
        now = asyncio.get_running_loop().time()
        start = now if free_at is None else min(now, max(free_at, job.received))
        job.decode_start = start + config.prefill_s
