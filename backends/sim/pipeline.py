"""The one request path both APIs share: parse, draw a fault, queue for a slot, decode, answer.

SGLang's /generate and OpenAI's /v1/chat/completions differ only in how a request is read and
how an answer is worded. Everything else (the 400 and fault bookkeeping, slot admission and
pacing, the stream framing, mid-stream and torn faults, disconnects, aborts and the stats) is
here once, so the two can never drift apart in how they queue, pace or fail. A front-end plugs
in through `Frontend`, the request it parsed through `Order`, and its stream wording through
`StreamWriter`.
"""

from __future__ import annotations

import abc
import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

import orjson
from aiohttp import web

from gen_tui.backends.sim import faults
from gen_tui.backends.sim.completion import BadRequest, Prompt
from gen_tui.backends.sim.config import SimConfig, SimStats, apply_config_patch, cost
from gen_tui.backends.sim.prefix_cache import PrefixCache
from gen_tui.backends.sim.slots import Job, Slots
from gen_tui.backends.sim.throughput import Throughput

__all__ = [
    "DONE",
    "MIDWAY_FAILURE",
    "Frontend",
    "Order",
    "Simulator",
    "StreamWriter",
    "json_response",
    "read_json",
    "sse",
]

DONE = b"data: [DONE]\n\n"
MIDWAY_FAILURE = "Simulated failure in the middle of generation"


def json_response(payload: object, status: int = 200) -> web.Response:
    """A JSON answer; every endpoint of both APIs answers through it."""
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def sse(payload: object) -> bytes:
    """One server-sent event carrying `payload` as JSON."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; a body that is not JSON is a 400, as on the real servers."""
    try:
        return orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"Invalid JSON body: {exc}") from None


class StreamWriter(Protocol):
    """How one API words a stream; the pipeline decides when each part is sent and cut."""

    def opening(self) -> list[bytes]:
        """What goes out before the first frame (an SSE comment, or nothing)."""
        ...

    def frame(self, start: int, end: int, *, last: bool) -> list[bytes]:
        """The events for tokens [start, end); `last` once, for the frame that ends the job."""
        ...

    def failure(self, start: int, end: int) -> list[bytes]:
        """How a generation that fails half-way ends the stream, tokens [start, end) included."""
        ...

    def closing(self) -> list[bytes]:
        """What follows the last frame of a healthy stream."""
        ...


class Order(Protocol):
    """A valid request as one API parsed it: its prompts and how to answer them."""

    @property
    def prompts(self) -> list[Prompt]: ...

    @property
    def stream(self) -> bool: ...

    def reply(self, results: list[tuple[Job, int]]) -> object:
        """The JSON body of a plain answer, from each job and the tokens it produced."""
        ...

    def writer(self, job: Job) -> StreamWriter:
        """The wording of the stream that answers `job` (a stream holds one prompt)."""
        ...


class Frontend(abc.ABC):
    """One API on the simulator: its routes, which faults it can see, its refusals and how it
    parses and words; `answer` is the handler of its generation endpoint."""

    fault_kinds: tuple[str, ...]

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    @abc.abstractmethod
    def add_routes(self, router: web.UrlDispatcher) -> None: ...

    async def answer(self, request: web.Request) -> web.StreamResponse:
        """Handle a generation request through the shared pipeline."""
        return await self.sim.serve(request, self)

    def authorize(self, request: web.Request) -> web.Response | None:
        """The refusal of a request without valid credentials; None to let it through."""
        return None

    @abc.abstractmethod
    async def parse(self, request: web.Request) -> Order:
        """Read and validate a request; raise BadRequest with what the client should see."""

    @abc.abstractmethod
    def error(self, status: int, message: str) -> web.Response:
        """An error answer in this API's body shape."""

    def limit_headers(self, config: SimConfig) -> dict[str, str]:
        """Rate-limit headers a 429 carries besides Retry-After."""
        return {}


async def _write(response: web.StreamResponse, events: Iterable[bytes]) -> None:
    for event in events:
        await response.write(event)


class Simulator:
    """The server's state (config, stats, slots, jobs by rid) and the request pipeline.

    Front-ends and endpoints read `config` through this object on every request, because
    `SimServer.config` may swap it for another while the server runs.
    """

    def __init__(self, config: SimConfig) -> None:
        config.validate()
        self.config = config
        self.stats = SimStats()
        self.slots = Slots(self)
        self.jobs: dict[str, set[Job]] = {}
        self.throughput = Throughput()
        self.prefix_cache = PrefixCache()
        """Which conversations' history this server holds, for /metrics' cache_hit_rate."""
        """The generated-token counter over time, for /metrics' measured gen_throughput."""
        self.fault_rng = random.Random(config.seed)
        self.closing = asyncio.Event()
        self.shutting_down = False

    def begin_shutdown(self) -> None:
        """Refuse health checks, abort everything and end hangs, so shutdown is prompt."""
        self.shutting_down = True
        self.closing.set()
        self.abort(None, abort_all=True)

    async def on_shutdown(self, _app: web.Application) -> None:
        self.begin_shutdown()

    def abort(self, rid: str | None, *, abort_all: bool = False) -> None:
        """Abort the jobs of `rid` (or all): queued ones leave the queue, running ones stop."""
        if abort_all:
            targets = [job for jobs in self.jobs.values() for job in jobs]
        else:
            targets = list(self.jobs.get(rid, ())) if isinstance(rid, str) else []
        for job in targets:
            job.abort_event.set()
            self.slots.withdraw(job)

    def reconfigure(self, patch: Mapping[str, Any]) -> None:
        """Apply a partial config (all or nothing) and admit queued jobs if slots grew."""
        apply_config_patch(self.config, patch)
        self.slots.wake()

    async def serve(self, request: web.Request, api: Frontend) -> web.StreamResponse:
        """Answer one generation request of `api`, plain or streamed, faults included."""
        received = asyncio.get_running_loop().time()
        self.stats.requests += 1
        denied = api.authorize(request)
        if denied is not None:
            return denied
        try:
            order = await api.parse(request)
        except BadRequest as exc:
            self.stats.rejected += 1
            return api.error(400, str(exc))

        fault = faults.draw(self.fault_rng, self.config.faults, api.fault_kinds)
        if fault is not None:
            self.stats.faults[fault] += 1
            refusal = await faults.refuse(request, fault, self, api)
            if refusal is not None:
                return refusal

        jobs = [Job(prompt, received) for prompt in order.prompts]
        for prompt in order.prompts:
            self.stats.max_new_tokens[prompt.rid] = prompt.max_new_tokens
            self.prefix_cache.admit(prompt.rid, prompt.prompt_tokens)
        for job in jobs:
            self.jobs.setdefault(job.rid, set()).add(job)
        if order.stream:
            return await self._stream(request, jobs[0], order.writer(jobs[0]), fault)
        cut = fault == "stream_error"
        if len(jobs) == 1:
            results = [await self._decode(jobs[0], half=cut)]
        else:
            results = await asyncio.gather(*(self._decode(job, half=cut) for job in jobs))
        if cut:
            return api.error(500, MIDWAY_FAILURE)
        body = order.reply(results)
        if fault == "torn_json":
            return faults.torn_response(orjson.dumps(body))
        for job, produced in results:
            self._account(job, produced)
        return json_response(body)

    async def _decode(self, job: Job, *, half: bool) -> tuple[Job, int]:
        """Hold a slot for the job's decode time; return how many tokens it produced."""
        try:
            if not await self.slots.acquire(job):
                return job, 0
            target = len(job.output_ids) // 2 if half else len(job.output_ids)
            deadline = job.decode_start + target / job.tokens_per_s
            if await job.sleep_until(deadline):
                return job, max(0, min(target, job.produced(asyncio.get_running_loop().time())))
            job.free_at = deadline
            return job, target
        except asyncio.CancelledError:
            self._count_disconnect(job)
            raise
        finally:
            self._finish(job)

    async def _stream(
        self, request: web.Request, job: Job, writer: StreamWriter, fault: str | None
    ) -> web.StreamResponse:
        """An SSE response paced by the job's slot; a client that hangs up aborts the job."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )

        async def emit(start: int, end: int, kind: str) -> None:
            if kind == "cut":
                await _cut(response, writer, start, end, fault)
            else:
                await _write(response, writer.frame(start, end, last=kind == "last"))

        try:
            await response.prepare(request)
            await _write(response, writer.opening())
            cut_half = fault in ("stream_error", "torn_json")
            if await self._pace(job, emit, cut_half=cut_half) != "cut":
                await _write(response, writer.closing())
                await response.write_eof()
        except asyncio.CancelledError:
            self._count_disconnect(job)
            raise
        except ConnectionResetError:
            self._count_disconnect(job)
        finally:
            self._finish(job)
        return response

    async def _pace(
        self,
        job: Job,
        emit: Callable[[int, int, str], Awaitable[None]],
        *,
        cut_half: bool = False,
    ) -> str:
        """Decode a streamed job in a slot, calling `emit(start, end, kind)` as each frame of
        tokens [start, end) is ready: kind "frame", then "last" once (the job is settled and its
        slot free by then), or "cut" half-way when `cut_half` (a stream fault) instead of "last".
        Returns the last kind. A job aborted before it got a slot gets one ("last") of 0 tokens.
        """
        if not await self.slots.acquire(job):
            self._account(job, 0)
            await emit(0, 0, "last")
            return "last"
        loop = asyncio.get_running_loop()
        total = len(job.output_ids)
        cut = total // 2 if cut_half else None
        sent = 0
        while True:
            end = min(sent + self.config.frame_tokens, total)
            deadline = job.decode_start + end / job.tokens_per_s
            idle = deadline <= loop.time()
            aborted = await job.sleep_until(deadline)
            if aborted:
                end = max(sent, job.produced(loop.time()))
            done = aborted or end == total
            if not aborted:
                job.free_at = deadline
            if cut is not None and (end >= cut or done):
                self.slots.release(job)
                job.settled = True
                await emit(sent, end, "cut")
                return "cut"
            if done:
                self.slots.release(job)
                self._account(job, end)
                await emit(sent, end, "last")
                return "last"
            await emit(sent, end, "frame")
            sent = end
            if idle:
                await asyncio.sleep(0)

    def _account(self, job: Job, produced: int) -> None:
        job.settled = True
        if job.state == "aborted_in_queue" or (job.aborted and produced < len(job.output_ids)):
            self.stats.aborted += 1
            return
        self.stats.completed += 1
        self.stats.total_completion_tokens += produced
        self.stats.completed_rids.append(job.rid)
        self.prefix_cache.finish(job.rid, job.prompt.prompt_tokens, produced)
        billed = cost(self.config, job.prompt.prompt_tokens, produced) if job.prompt.chat else None
        if billed is not None:
            self.stats.total_cost += billed

    def _count_disconnect(self, job: Job) -> None:
        if not job.settled:
            job.settled = True
            self.stats.aborted += 1
            self.stats.disconnected += 1

    def _finish(self, job: Job) -> None:
        self.slots.release(job)
        if job.state != "aborted_in_queue":
            job.state = "done"
        peers = self.jobs.get(job.rid)
        if peers is not None:
            peers.discard(job)
            if not peers:
                del self.jobs[job.rid]


async def _cut(
    response: web.StreamResponse, writer: StreamWriter, start: int, end: int, fault: str | None
) -> None:
    """End a stream half-way: a reported failure (`stream_error`), or a frame torn in two and
    the connection closed (`torn_json`)."""
    if fault == "stream_error":
        await _write(response, writer.failure(start, end))
    else:
        *whole, event = writer.frame(start, end, last=False)
        await _write(response, whole)
        await response.write(event[: max(len(b"data: {"), len(event) // 2)])
        response.force_close()
    await response.write_eof()
