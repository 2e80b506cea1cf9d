"""The request runner: one sample sent until it is answered, given up on, or the run stops.

It owns the server set (which is up, which is least loaded), the retry policy (attempts
that count against a sample, outages that do not, jittered exponential backoff) and the
run-wide reactions to what servers say: slow down on 429, pause on 402 (over a fleet, a 402
takes only that lane out while another has credit), stop on a bad key.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import secrets
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from gen_tui.backends.alerts import AlertEvent
from gen_tui.backends.budget.lengths import InFlight, LatencyLine, tokens_by
from gen_tui.backends.clients.base import InferenceClient, Request
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.config.run import EngineError, queued_concurrency
from gen_tui.backends.drain_notice import (
    OVERDUE_S,
    POLL_S,
    LapseKey,
    Notice,
    local_notice_folder,
    notice_keys,
    read_notices,
    this_machine,
)
from gen_tui.backends.engine.answer_cap import AnswerCap
from gen_tui.backends.engine.checks import receive
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.feeder import Feeder
from gen_tui.backends.engine.moves import Moves
from gen_tui.backends.engine.sink import DatasetSink
from gen_tui.backends.engine.slots import SlotPool
from gen_tui.backends.store.prompts import Prompt
from gen_tui.backends.untrusted import one_line

BACKOFF_CAP_S = 30.0
ROUTER_WORKERS_NAMED = 8
"""How many of a router's workers the start-up line names (the rest are counted)."""
MAX_OUTAGE_RETRIES = 240
"""Tries to reach an unreachable server before a sample is given up (about 2 h at the cap).

A server restart is waited out; a sample that always breaks the connection is not retried
forever."""


PROBE_REQUESTS = 1
"""What a priced lane sends before the first plan: one request. The plan counts its rate per
request at the lane's width, which one answer measures as well as a wave; a wave was bought
whatever the plan then gave the lane (at a 40 s deadline a cheaper batch lane would have made
them: the API's first wave, 16 answers, was its only share but its taper's, about 11% of the
run's cost at twice the batch price, 1.06x to 1.11x the optimum)."""


class Server:
    """One server URL and what the runner knows of its health and load; over a mixed fleet,
    its lane too: its own concurrency, and the tokens the planner lets it take."""

    def __init__(self, url: str, limit: int | None = None, priced: bool = False) -> None:
        self.url = url.rstrip("/")
        self.priced = priced
        """Its lane has a price (a free one's, the box's, may have its requests moved)."""
        self.outstanding = 0
        self.down_until = 0.0
        self.last_error = ""
        self.failures = 0
        """Connection failures in a row: a server that stays dead is tried less and less.
        One outage counts once, however many requests it cut (see `failed_at`)."""
        self.failed_at = -math.inf
        """When its last failure was counted (monotonic). A request sent before that went
        down with the same outage: it neither counts again nor moves `down_until`. Counted
        per request, a server killed with 16 requests in flight was at its 16th failure at
        once, its backoff at the 30 s cap (15 to 45 s with the jitter), and a server its
        supervisor had back in 2 s stayed unused for 40 s."""
        self.draining = False
        """Its supervisor drains it before a stop (a drain notice on this machine,
        backends/drain_notice.py): no new request goes there; those in flight finish."""
        self.unpaid = False
        """It answered 402 (out of credits) and has not answered since: planned at no tokens,
        tried again with one request once `down_until` passes (`credit_probe_s`)."""
        self.limit = limit
        """Its requests in flight at most (a lane's concurrency; None: the pool's alone)."""
        self.allowance = math.inf
        """Tokens it may still take, in flight included (the fleet planner's share; a free
        lane's is never capped, and a priced lane's is its probe until the first plan)."""
        self.probe_left: int | None = PROBE_REQUESTS if priced else None
        """Before the first plan, a priced lane sends PROBE_REQUESTS, to measure its rate."""
        self.tokens = 0
        self.answers = 0
        self.cost = 0.0
        self.request_s = 0.0
        """Completion tokens, answers, dollars and request-seconds of its answers so far:
        its rate per request and its price per token, as the planner measures them."""
        self.request_s2 = 0.0
        """The sum of its request times' squares: their spread, for the plan's margin."""
        self.tokens2 = 0
        """The sum of its answers' lengths' squares: their spread, for the spend cap's
        reserve (what its answers in flight may add past their mean)."""
        self.line = LatencyLine()
        """Its answers' latency against their length: in a fleet, what the budget reads a
        request's progress from by its age (budget/lengths.py `LatencyLine`)."""
        self.first_sent: float | None = None
        """When its first request went (a free lane's rate is its tokens since then)."""
        self.first_answered: float | None = None
        """When its first answer came back: the pipe's filling time is the span from
        `first_sent` (its mean request time is not, once requests queue at the server)."""
        self.first_tokens = 0
        """Its first answer's completion tokens: over the filling time, a slot's pace with
        no queue before it (the first answer back never waited for a slot)."""
        self.capacity: int | None = None
        """The requests it runs at once, as it said at the start (SGLang's
        max_running_requests; None: it does not say, as an API does not)."""
        self.flying: dict[str, InFlight] = {}
        """Its requests on the wire by rid: what they have streamed so far is work it has
        done (`streamed`) that no answer has brought back yet."""

    def answered(self, tokens: int, took_s: float, cost: float) -> None:
        """Count one answer of `tokens` that took `took_s` and cost `cost` dollars: the
        planner's measures, its share spent, and its latency line."""
        self.tokens += tokens
        self.answers += 1
        self.allowance -= tokens
        self.request_s += took_s
        self.request_s2 += took_s * took_s
        self.tokens2 += tokens * tokens
        self.line.add(tokens, took_s)
        self.cost += cost

    def take(self) -> None:
        """One more request here: its slot, and before the first plan one of its probes."""
        self.outstanding += 1
        if self.probe_left is not None:
            self.probe_left = max(0, self.probe_left - 1)

    def give_back(self) -> None:
        """A slot `take` took that no request used (moved elsewhere, or the run stopped):
        free again, and its probe too."""
        self.outstanding -= 1
        if self.probe_left is not None:
            self.probe_left += 1

    def streamed(self) -> int:
        """The tokens its requests in flight have streamed so far (0 from a client that
        does not stream: their work shows only as their answers land)."""
        return sum(entry.produced for entry in self.flying.values())

    def made_in_flight(self, now: float) -> float | None:
        """What its requests in flight have made so far: each one's streamed count, or from
        a client that does not stream (SGLang's native default) its time past its latency
        line's start at the line's seconds per token, up to its cap, and only for the
        oldest `capacity` of them (the rest wait for a slot at the server). Before the line
        has its points, at its answers' request-seconds per token from their sending, if
        none waits for a slot (a queue's wait would count as work). None: nothing to read
        an age by, and nothing streamed."""
        fitted = self.line.fitted()
        unqueued = self.capacity is not None and 0 < len(self.flying) <= self.capacity
        if fitted is None and unqueued and self.tokens > 0 and self.request_s > 0:
            fitted = (0.0, self.request_s / self.tokens)
        if fitted is None:
            streamed = self.streamed()
            return float(streamed) if streamed else None
        made = 0.0
        oldest = sorted(self.flying.values(), key=lambda entry: entry.started)
        for running, entry in enumerate(oldest):
            if entry.produced:
                made += entry.produced
            elif self.capacity is None or running < self.capacity:
                ran = tokens_by(fitted, now - entry.started)
                made += min(float(entry.max_new_tokens), ran)
        return made

    @property
    def mean_answer(self) -> float:
        return self.tokens / self.answers if self.answers else 0.0

    @property
    def answer_spread(self) -> float:
        """The standard deviation of its answers' lengths (0 before two)."""
        if self.answers < 2:
            return 0.0
        mean = self.mean_answer
        return math.sqrt(max(0.0, self.tokens2 / self.answers - mean * mean))

    def has_room(self) -> bool:
        """Whether one more request may go here now (up, under its limit and share)."""
        if self.down_until > time.monotonic() or self.draining:
            return False
        if self.limit is not None and self.outstanding >= self.limit:
            return False
        if self.unpaid:  # one request at a time asks whether its credits are back
            return self.outstanding == 0
        if self.probe_left is not None:
            return self.probe_left > 0
        return self.allowance - self.outstanding * self.mean_answer > 0

    def has_slot(self) -> bool:
        """Whether it could take one more request now, its planned share aside: up, paid and
        under its lane's limit (a request the deadline hurries may pass its share)."""
        if self.down_until > time.monotonic() or self.unpaid or self.draining:
            return False
        return self.limit is None or self.outstanding < self.limit

    def expected_s(self, tokens: float | None = None) -> float | None:
        """How long a request takes here: its mean request time so far, or, for an answer of
        `tokens`, that many of its mean seconds per token (None: no answer yet)."""
        if not self.answers:
            return None
        if tokens is None or self.tokens <= 0:
            return self.request_s / self.answers
        return self.request_s / self.tokens * tokens

    @property
    def status(self) -> str:
        if self.unpaid:
            return f"out of credits: {self.last_error}"
        if self.down_until > time.monotonic():
            return f"unreachable: {self.last_error}"
        if self.draining:
            return "drain notice: stopped on purpose, sent nothing new"
        return "ok"


class RequestRunner(RunPart):
    """Sends requests through `client` to the least loaded server that is up."""

    def __init__(
        self,
        run: RunContext,
        client: InferenceClient,
        pool: SlotPool,
        feeder: Feeder,
        sink: DatasetSink,
    ) -> None:
        super().__init__(run)
        self.client = client
        self.pool = pool
        self.feeder = feeder
        self.sink = sink
        lanes = {lane.url: lane for lane in run.config.fleet}
        self.servers = [
            Server(url, run.config.lane_concurrency(lanes[url]), lanes[url].price_per_token > 0)
            if url in lanes
            else Server(url)
            for url in run.config.server_urls
        ]
        self.on_stall: Callable[[], None] | None = None
        """Called when no server has room under the fleet plan and none has a request in
        flight: the plan's shares are spent before the budget, so re-plan now."""
        self.affinity: dict[tuple[str, str], Server] = {}
        """With `--turns all`: the server each conversation in flight was last answered by.
        Its next turn goes there while it is up: the history is that server's prefix cache
        (SGLang's radix cache), which another server would prefill again in full."""
        self.active: dict[str, Server] = {}
        """The rid of every request on the wire, and where it went (to abort it)."""
        self.moves: Moves[Server] = Moves()
        """A fleet's requests on a free lane, which the deadline's watch may move to a
        faster one (overtime.py)."""
        self._aborting: set[asyncio.Task[None]] = set()
        self._rng = random.Random(run.config.hooks.seed)
        self._rid_stem = secrets.token_hex(4)
        self._rids = itertools.count()
        """A request's rid ends in this run's random stem and a count: unique on a server
        shared with other runs (SGLang refuses a rid already in flight), with no random
        draw per request."""

    # servers

    async def check_servers(self) -> None:
        """Probe every server; none reachable ends the run before it starts."""
        problems = await asyncio.gather(*(self.client.probe(s.url) for s in self.servers))
        if all(problem is not None for problem in problems):
            raise EngineError("no inference server reachable: " + "; ".join(filter(None, problems)))
        for server, problem in zip(self.servers, problems, strict=True):
            if problem is not None:
                server.last_error = problem
                server.down_until = time.monotonic() + 5
                self.reporter.event("warning", f"server {server.url} not answering yet: {problem}")
        await self._announce_routers()
        await self._check_queue()

    async def _announce_routers(self) -> None:
        """Say once, at start, which URLs are routers and over which workers: aborts and
        the capacity advice then go to those workers, and a router listing none is a
        warning (an abort through it would reach nothing)."""
        found = await asyncio.gather(*(self.client.workers(s.url) for s in self.servers))
        for server, workers in zip(self.servers, found, strict=True):
            if workers is None:
                continue
            if not workers:
                self.reporter.event(
                    "warning",
                    f"{server.url} is an SGLang router that lists no workers (GET /workers): "
                    "requests it holds cannot be aborted",
                )
                continue
            names = ", ".join(worker.url for worker in workers[:ROUTER_WORKERS_NAMED])
            more = len(workers) - ROUTER_WORKERS_NAMED
            healthy = sum(worker.healthy for worker in workers)
            self.reporter.event(
                "info",
                f"{server.url} is an SGLang router over {len(workers)} workers, {healthy} "
                f"healthy ({names}{f' and {more} more' if more > 0 else ''}): aborts go to "
                "each worker, since the router does not pass /abort_request on",
            )

    async def _check_queue(self) -> None:
        """Say so when the pool cannot keep a queue at the servers.

        With no more requests than the servers run at once, each of their slots idles for a
        round trip (answer out, commit, next request in) after every answer: 1 to 3% of the
        capacity on loopback, more across a network. A few requests queued at the server
        hide it; the concurrency stays the user's choice. Said only when every server
        tells its capacity.
        """
        batches = await self.capacities()
        for server, batch in zip(self.servers, batches, strict=True):
            server.capacity = batch
        if None in batches or self.config.auto_concurrency:
            return
        running = sum(b for b in batches if b is not None)
        if self.config.max_concurrency <= running:  # not auto: the user's number
            self.reporter.event(
                "info",
                f"--concurrency {self.config.max_concurrency} is not above the servers' running "
                f"batch (max_running_requests {running}): each slot will idle for a round trip "
                f"between answers; about {queued_concurrency(running)} keeps a queue at the "
                "server and the slots full",
            )

    async def capacities(self) -> list[int | None]:
        """Each server's max_running_requests, where it says."""
        return list(await asyncio.gather(*(self.client.capacity(s.url) for s in self.servers)))

    async def answer_cap(self) -> AnswerCap:
        """The run's rule for each answer's cap, from what the servers say of their model:
        the smallest context and answer cap any of them gives (a request may go to any)."""
        said = await asyncio.gather(*(self.client.model_limits(s.url) for s in self.servers))
        contexts = [limits.context_length for limits in said if limits.context_length]
        completions = [
            limits.max_completion_tokens for limits in said if limits.max_completion_tokens
        ]
        return AnswerCap(
            given=self.config.max_new_tokens_given,
            context_length=min(contexts, default=None),
            max_completion_tokens=min(completions, default=None),
        )

    async def watch_drains(self, folder: Path | None = None, poll_s: float = POLL_S) -> None:
        """Follow the drain notices of the run's servers (backends/drain_notice.py) every
        `poll_s` until cancelled: a server of this run being drained before its stop takes
        no new request (its requests in flight finish), and takes them again once its
        notice is gone. The notices are this machine's servers' and the batch jobs' on the
        nodes (`PORT@NODE.json`); returns at once when no server of the run can have one
        (an API's URL)."""
        local = await asyncio.to_thread(this_machine)
        watched = [(server, notice_keys(server.url, local)) for server in self.servers]
        watched = [(server, keys) for server, keys in watched if keys]
        if not watched:
            return
        where = folder or local_notice_folder()
        said: set[tuple[str, str]] = set()
        overdue: dict[str, float] = {}
        """Servers (by URL) whose notice outlived its drain and was ignored: each with its
        notice's time (ignored until a new notice is written)."""
        lapsed: dict[LapseKey, float] = {}
        """When each notice's link writer was first seen gone (LINK_HOLD_S)."""
        while True:
            notices = await asyncio.to_thread(read_notices, where, lapsed)
            for level, lines, verb in (
                ("warning", notices.bad, "ignored"),
                ("info", notices.held, "held"),
            ):
                for path, why in lines:
                    if (path, why) not in said:  # one line per file and cause, not per look
                        said.add((path, why))
                        self.reporter.event(level, f"{one_line(path)}: {verb}: {why}")
            found = [(server, notices.of(keys)) for server, keys in watched]
            for server, notice in found:
                honoured = notice is not None and overdue.get(server.url) != notice.since
                self.note_drain(server, honoured)
            self._ignore_overdue(found, overdue)
            await asyncio.sleep(poll_s)

    def _ignore_overdue(
        self, found: Iterable[tuple[Server, Notice | None]], overdue: dict[str, float]
    ) -> None:
        """A notice past its drain and its stop's grace (OVERDUE_S more) is ignored, said
        in one line, when its writer's life is not known here (another machine's: it may
        have died without removing it), or when the run has no server to send to (each
        drains or is down: the writer stopped it for good and could not remove it). The run
        sends there again as if there were no notice (a server that does not answer is
        retried with the usual backoff). A live writer of this machine's notice with other
        servers up is honoured until it removes it (a restart keeps it until healthy)."""
        now = time.monotonic()
        stuck = not any(s.down_until <= now and not s.draining for s in self.servers)
        wall = time.time()
        for server, notice in found:
            if not server.draining or notice is None or wall < notice.ends + OVERDUE_S:
                continue
            if notice.known and not stuck:
                continue
            overdue[server.url] = notice.since
            why = (
                "and no other server is up"
                if notice.known
                else "and its writer is another machine's (whether it lives is not known here)"
            )
            self.reporter.event(
                "warning",
                f"{server.url}: its drain notice is {wall - notice.since:.0f} s old, past "
                f"its drain and stop ({notice.ends - notice.since:g} s), {why}: the notice "
                "is ignored, sent to again (retried with the usual backoff while it does not "
                "answer)",
            )
            self.note_drain(server, False, quiet=True)

    def note_drain(self, server: Server, draining: bool, quiet: bool = False) -> None:
        """`server` drains now (or no longer): said once per change (not when `quiet`: the
        caller said why)."""
        if server.draining == draining:
            return
        server.draining = draining
        if draining and not quiet:
            self.reporter.event(
                "info",
                f"{server.url} is being drained before a stop (its supervisor's notice): "
                f"no new request goes there, its {server.outstanding} in flight finish",
            )
        elif not draining:
            if not quiet:
                self.reporter.event(
                    "info",
                    f"{server.url} is no longer drained (its notice is gone): sent to again",
                )
            self.signals.wake.set()  # the dispatcher may have waited for it
        if self.on_stall is not None:
            self.on_stall()  # a fleet re-plans without it (or with it again)

    def statuses(self) -> dict[str, str]:
        return {server.url: server.status for server in self.servers}

    def _any_server_up(self) -> bool:
        now = time.monotonic()
        return any(s.down_until <= now for s in self.servers)

    def reserve(self) -> Server | None:
        """The server a new request goes to, its slot taken now (the dispatcher launches
        several requests before any runs: each must see the others' slots as taken); None
        when servers are up but none has room under its limit and its planned share. With
        none up, the one back soonest (the request waits on the outage's backoff)."""
        now = time.monotonic()
        if any(s.has_room() for s in self.servers) or not any(
            s.down_until <= now for s in self.servers
        ):
            server = self._pick_server()
            server.take()
            return server
        if self.on_stall is not None and not any(s.outstanding for s in self.servers):
            self.on_stall()  # every lane's share is spent and nothing is in flight
        return None

    def move(self, taken: Server, to: Server) -> None:
        """The slot `reserve` took on `taken` taken on `to` instead."""
        taken.give_back()
        to.take()

    def _pick_server(self, prefer: Server | None = None) -> Server:
        """A server with room (under its lane's limit and planned share), the least loaded
        for its size; `prefer` (a conversation's server) while it is up and has room. With
        none roomy, the least loaded up (a retry whose lane went away); none up, the one
        back soonest."""
        now = time.monotonic()
        if prefer is not None and prefer.down_until <= now and prefer.has_room():
            return prefer
        if prefer is not None and prefer.draining:
            prefer = None  # its conversation's next turn goes elsewhere
        roomy = [s for s in self.servers if s.has_room()]
        if roomy:
            # The least loaded for its size: a lane of 64 slots takes more than one of 4.
            return min(roomy, key=lambda s: s.outstanding / (s.limit or 1))
        if prefer is not None and prefer.down_until <= now:
            return prefer
        up = [s for s in self.servers if s.down_until <= now]
        if any(not s.draining for s in up):  # a draining one only when all up drain
            up = [s for s in up if not s.draining]
        if up:
            return min(up, key=lambda s: s.outstanding / (s.limit or 1))
        return min(self.servers, key=lambda s: s.down_until)

    # one sample

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, 300.0) + self._rng.uniform(0, 0.1)
        return min(BACKOFF_CAP_S, 0.25 * 2.0**attempt) * self._rng.uniform(0.5, 1.5)

    async def run(
        self,
        ds: DatasetRun,
        entry: InFlight,
        prompt: Prompt,
        input_ids: list[int] | None,
        max_new_tokens: int | None = None,
        reserved: Server | None = None,
    ) -> None:
        """Send one sample until it completes, fails for good, or the run stops.

        `entry` was registered by the dispatcher before this task first ran, so the budget
        sees it at once; it is removed here whatever happens. A streaming client counts
        each attempt's tokens into it as they arrive (`entry.produced`, from 0 again on a
        retry, as is its start). `max_new_tokens` is this request's cap (the client's
        sampling settings when None). `reserved`: the server whose slot the dispatcher took
        for the first attempt (see `reserve`).
        """
        try:
            await self.send(ds, entry, prompt, input_ids, max_new_tokens, reserved)
        finally:
            ds.inflight.remove(entry)

    async def send(
        self,
        ds: DatasetRun,
        entry: InFlight,
        prompt: Prompt,
        input_ids: list[int] | None,
        max_new_tokens: int | None = None,
        reserved: Server | None = None,
    ) -> Generation | None:
        """`run` without removing `entry` (a conversation keeps it from turn to turn):
        the answer, once it is on disk; None if it was given up, dropped or the run stopped."""
        attempts = 0
        outages = 0
        signals = self.signals
        while True:
            if reserved is not None:
                server, reserved = reserved, None
            else:
                server = self._pick_server(self.affinity.get((ds.name, prompt.key)))
                server.take()
            self.begin_attempt(entry, server)
            turn = "" if prompt.turn is None else f"#{prompt.turn}"
            rid = f"{ds.name}/{prompt.sample_id}{turn}/{self._rid_stem}{next(self._rids):x}"
            if server.first_sent is None:
                server.first_sent = entry.started
            self.active[rid] = server
            server.flying[rid] = entry
            moved = self.moves.open(rid) if self._movable(server) else None
            try:
                request = Request(rid, ds.name, prompt.messages, input_ids, max_new_tokens)
                call = self.client.generate(server.url, request, entry)
                attempt = receive(call, server.url, self.client.secret)
                if moved is None:
                    generation = await attempt
                else:
                    outcome = await self.moves.unless_moved(attempt, moved)
                    if isinstance(outcome, Server):  # moved: to a faster lane, by the deadline
                        self._abort_soon(rid, server)
                        if signals.stopping:
                            outcome.give_back()
                            return None
                        reserved = outcome  # its slot taken; no attempt counted
                        continue
                    generation = outcome
            except RequestFailed as exc:
                if exc.kind == RequestFailed.PAYMENT and self._unpaid(server, exc):
                    continue  # another lane has credit: the sample goes there now
                self._react(exc)
                if exc.kind == RequestFailed.PAYMENT:
                    await signals.credits.wait()
                    if signals.stopping:
                        return None
                    continue
                if exc.counts:
                    attempts += 1
                    outages = 0
                else:
                    outages += 1
                    server.last_error = exc.reason
                    if entry.started >= server.failed_at:  # not one cut by a counted outage
                        server.failures += 1
                        server.failed_at = time.monotonic()
                        server.down_until = server.failed_at + self._backoff(server.failures, None)
                    if outages in (1, 10) or outages % 100 == 0:
                        self.reporter.event("warning", f"{ds.name}: {exc.reason} (retrying)")
                if (
                    not exc.retry
                    or attempts > self.config.max_retries
                    or outages > MAX_OUTAGE_RETRIES
                ):
                    self._give_up(ds, prompt, exc, attempts)
                    return None
                if signals.stopping:
                    return None
                if not exc.counts and self._any_server_up():
                    continue  # this server is away, another is up: go there now
                await asyncio.sleep(self._backoff(attempts + outages, exc.retry_after))
                if signals.stopping:
                    return None
                continue
            finally:
                server.outstanding -= 1
                self.active.pop(rid, None)
                server.flying.pop(rid, None)
                self.moves.close(rid)
            server.down_until = 0.0
            server.failures = 0
            if server.unpaid:
                server.unpaid = False
                self.reporter.event("info", f"{server.url} answers again: its credits are back")
                if self.on_stall is not None:
                    self.on_stall()  # re-plan now, with it
            if server.first_answered is None:
                server.first_answered = time.monotonic()
                server.first_tokens = generation.completion_tokens
            cost = self.sink.cost.price(generation, server.url) or 0.0
            server.answered(generation.completion_tokens, time.monotonic() - entry.started, cost)
            self.pool.grow()
            if prompt.turn is not None and self.config.server_affinity:
                # Its next turn's history is in this server's cache.
                self.affinity[(ds.name, prompt.key)] = server
            generation = await self.feeder.attach_ids(generation, prompt.messages)
            await self.sink.keep(ds, prompt, generation, server.url)
            return generation if prompt.record_key in ds.done else None

    def move_request(self, rid: str, to: Server) -> bool:
        """Call the attempt `rid` off and send its request again to `to` (its slot taken
        now): False when it has ended, been moved already, or may not be moved."""
        if rid not in self.moves:
            return False
        to.take()
        return self.moves.move(rid, to)

    def _movable(self, server: Server) -> bool:
        """Whether an attempt on `server` may be moved: a free lane of a fleet (a priced
        lane's answer called off would be paid and never counted)."""
        return bool(self.config.fleet) and len(self.servers) > 1 and not server.priced

    def _abort_soon(self, rid: str, server: Server) -> None:
        """Ask `server` to stop `rid` (a moved attempt; best effort, its stream is closed
        already), without holding the move up."""
        task = asyncio.create_task(self.abort([(rid, server)]))
        self._aborting.add(task)
        task.add_done_callback(self._aborting.discard)

    def begin_attempt(self, entry: InFlight, server: Server) -> None:
        """An attempt of `entry` starts on `server`: its age and produced count from now; in
        a fleet, its progress read by its lane's own latency line (`LatencyLine`): one line
        over a box at 100 tok/s and an API at 2,000 took the box's requests for answers
        at about the cap, and the box ran 1 to 4 of its 8 slots."""
        entry.started = time.monotonic()
        entry.produced = 0
        entry.line = server.line if self.config.fleet else None

    def _unpaid(self, server: Server, exc: RequestFailed) -> bool:
        """A 402 from `server` while another server has credit: that lane alone is out,
        planned at no tokens (its share goes to the others at once) and asked again every
        `credit_probe_s`. False when no other server has credit: the whole run pauses."""
        if not any(s is not server and not s.unpaid for s in self.servers):
            return False
        probe = self.config.credit_probe_s
        server.down_until = max(server.down_until, time.monotonic() + probe)
        server.last_error = exc.reason
        if not server.unpaid:
            server.unpaid = True
            self.reporter.event(
                "warning",
                f"{server.url}: {exc.reason}: its tokens go to the other lanes "
                f"(asking it again every {probe:g} s)",
            )
            if self.on_stall is not None:
                self.on_stall()  # re-plan now, without it
        return True

    def _react(self, exc: RequestFailed) -> None:
        """Run-wide reactions: slow down on 429s, pause on 402, stop on a refused key."""
        if exc.kind == RequestFailed.RATE and self.pool.cut():
            self.reporter.event(
                "warning", f"rate limited: concurrency cut to {int(self.pool.limit)}"
            )
        elif exc.kind == RequestFailed.PAYMENT and self.signals.credits.is_set():
            self.signals.credits.clear()
            probe = self.config.credit_probe_s
            message = f"{exc.reason}: dispatch paused; add credits (retrying every {probe:g} s)"
            self.reporter.event("error", message)
            self.reporter.alert(AlertEvent.CREDITS, message, repeat=False)
            asyncio.get_running_loop().call_later(probe, self.signals.credits.set)
        elif exc.kind == RequestFailed.AUTH:
            self.reporter.fail(exc.reason)

    def _give_up(self, ds: DatasetRun, prompt: Prompt, exc: RequestFailed, attempts: int) -> None:
        ds.errors += 1
        ds.quality.error(exc.reason)
        refused = not exc.retry and exc.status is not None and 400 <= exc.status < 500
        self.reporter.refused(refused, exc.reason)
        self.sink.note_failure(ds, prompt, exc, attempts)
        if ds.errors <= 5 or ds.errors % 100 == 0:
            self.reporter.event(
                "warning", f"{ds.name}: sample {prompt.sample_id!r} failed: {exc.reason}"
            )

    async def abort(self, rids: list[tuple[str, Server]]) -> None:
        """Ask the servers to stop `rids`, when the client can (best effort)."""
        if not self.client.can_abort:
            return
        await asyncio.gather(
            *(self.client.abort(server.url, rid) for rid, server in rids),
            return_exceptions=True,
        )
