"""The batch lane (`--api openai-batch`): a dataset's prompts sent as batches, within its budget.

What it keeps of the live engine: the feed (prompts read and tokenized off the loop), the
budget's picture of what is in flight (each line of a batch is an `InFlight` entry of its
dataset from the moment it is chosen), the record writer (`DatasetSink.keep`, so records,
verify and export are the live path's) and the run's signals. What it adds:

- Waves sized by the budget (`budget.expected.batch_room`): the tokens on disk plus what
  is in batches, at the mean, plus a margin for the spread of their sum, stay within the
  budget; each batch is what is left of that room, so later waves are smaller as the
  budget nears, and a dataset with nothing in flight and no room sends what its mode's
  rule allows one request (predictive crosses its budget, precise stops short).
- Exactly once across restarts: a batch's samples are written to the dataset folder's
  journal (`store.batch_journal`) before the batch is created, its id once it is, and its
  close once its answers are records; a restarted run polls and downloads the open ones
  instead of sending their samples again.
- Give-back: an expired, cancelled or partly failed batch's unfinished samples go back to
  the front of its dataset's queue; its finished ones are kept.
- A stop (`k`, SIGTERM) cancels the batches in flight, then downloads what they finished
  (providers bill those) within the grace period; a second stop leaves them in the journal
  for the next run.
- As a lane of a mixed fleet (`--lane NAME=URL,api=openai-batch`, issue 34) it runs beside
  the dispatch loop and takes only the tokens the fleet planner gives it (`allowance`);
  the live lanes send the rest, the budget's last answers included. It tells the planner
  its observed turnaround, its price and what it can deliver (`planned`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gen_tui.backends.aio import wait_event
from gen_tui.backends.budget.expected import batch_room
from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.clients.batch import BatchClient, BatchLines, BatchState
from gen_tui.backends.clients.limits import response_limit
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.config.lanes import DEFAULT_TURNAROUND_S, LaneSpec
from gen_tui.backends.engine.context import RunContext, RunPart
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.dataset import DatasetRun, Queued
from gen_tui.backends.engine.feeder import Feeder
from gen_tui.backends.engine.scheduler import Scheduler
from gen_tui.backends.engine.sink import DatasetSink
from gen_tui.backends.engine.slots import SlotPool
from gen_tui.backends.figures import counted
from gen_tui.backends.plan import Lane
from gen_tui.backends.progress.batches import BATCH_COUNTS_SAID, MAX_BATCHES, BatchView
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.store.batch_journal import BatchJournal, JournalError, OpenBatch
from gen_tui.backends.store.prompts import Prompt, iter_prompts

BATCH_KEY = "gen_tui_batch"
"""The metadata key a batch carries its journal key in: how a restarted run finds a batch
whose create it never heard answered."""
SIM_DATASET_KEY = "sim_dataset"
"""The simulator's metadata key for the dataset's length profile (sent with the hook on)."""
STOP_POLL_S = 1.0
"""Poll interval after a stop: the cancelled batches' last answers are waited for."""
UNRUN = ("batch_expired", "batch_cancelled")
"""The error codes of a line its batch never ran: no attempt of its sample."""
COLLECT_RUN = 256
"""Answers of a batch written before their in-flight entries leave together."""
ENDGAME_ANSWERS = 8
"""With no live finish, a predictive dataset with room for fewer answers than this (and no
batch out) sends its last wave sized to reach its budget at the mean, not by the spread
margin: the margin would make it several waves of a few answers, each a provider round
trip of hours. A precise one is told so (its rule allows no such wave)."""
BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Waits between tries of a batch call that failed and may work again."""


@dataclass
class Flight:
    """One batch of one dataset, from its intent to its close."""

    ds: DatasetRun
    batch: OpenBatch
    prompts: dict[str, Prompt]
    """custom_id: the prompt of each line."""
    entries: dict[str, InFlight]
    """custom_id: its entry in the dataset's in-flight list (what the budget sees)."""
    data: bytes | None = None
    """The input file, until it is uploaded (None for a batch resumed from the journal)."""
    state: BatchState | None = None
    cancel_sent: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    started: float = field(default_factory=time.monotonic)
    """When this run started it (a batch resumed from the journal: when it was picked up)."""
    fresh: bool = False
    """Created by this run (its turnaround is known; a resumed one's began before)."""


def _drop(ds: DatasetRun, entries: Iterable[InFlight]) -> None:
    """Take `entries` out of `ds`'s in-flight list, by identity, in one pass."""
    gone = {id(entry) for entry in entries}
    if gone:
        ds.inflight[:] = [entry for entry in ds.inflight if id(entry) not in gone]


def custom_id(ds: DatasetRun, key: str) -> str:
    """A line's custom_id: the dataset and the sample, unique across a run's datasets."""
    return f"{ds.name}/{key}"


class BatchLane(RunPart):
    """Sends every dataset's prompts as batches and turns their output lines into records."""

    def __init__(
        self,
        run: RunContext,
        client: BatchClient,
        feeder: Feeder,
        sink: DatasetSink,
        scheduler: Scheduler,
        cost: CostMeter,
        executor: ThreadPoolExecutor,
        request_cap: Callable[[Prompt, list[int] | None], int],
        pool: SlotPool,
        send_live: Callable[[DatasetRun, Prompt, list[int] | None], None],
        spec: LaneSpec | None = None,
    ) -> None:
        super().__init__(run)
        self.client = client
        self.feeder = feeder
        self.sink = sink
        self.scheduler = scheduler
        self.cost = cost
        self.executor = executor
        self.request_cap = request_cap
        self.pool = pool
        self.send_live = send_live
        self.live: set[str] = set()
        """Datasets in their live finish (`batch_live_finish`): their last requests go live."""
        self.endgame: set[str] = set()
        """Datasets whose endgame (`_last_wave`) has been said (once each)."""
        self.spec = spec
        """Its lane of a mixed fleet (None: `--api openai-batch`, the whole run's lane)."""
        self.url = (spec.url if spec is not None else run.config.server_urls[0]).rstrip("/")
        self.allowance = math.inf if spec is None else 0.0
        """Completion tokens it may still send in new batches (the fleet planner's share,
        beyond its batches in flight: nothing until the first plan gives it some). A batch
        takes its lines at the mean answer as it goes out; its answers coming back shorter
        free nothing: a new batch then would land a whole turnaround later, past the plan."""
        self.land_by: float | None = None
        """When a fleet lane's new batch must land (`time.monotonic()`; None: no deadline):
        the plan's deadline less its margin, set by the fleet planner. A batch landing after
        it holds the budget's taper on the live lanes (its rule waits on what is in flight)."""
        self.tokens = 0
        self.answers = 0
        self.spent = 0.0
        self.turnarounds: list[float] = []
        """Seconds from create to end of each batch this run sent and saw end (its pace)."""
        self.journals = {ds.name: BatchJournal(ds.folder) for ds in run.datasets}
        self.flights: dict[str, Flight] = {}
        self.attempts: dict[str, int] = {}
        """custom_id: the batches whose line for it failed (the live path's attempt count)."""
        self.stopped = asyncio.Event()
        """Set at a stop: every flight polls at once and sends its cancel."""

    # opening

    async def _journal(self, call: Callable[..., object], *args: object) -> object:
        """A journal call in the worker thread; a journal that cannot be written ends the run."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, call, *args)

    async def open(self) -> None:
        """Read every dataset's journal (before its feed starts: the samples of its open
        batches are passed over by the feed, they are answered already or will be)."""
        for ds in self.datasets:
            journal = self.journals[ds.name]
            try:
                problems = await self._journal(journal.load)
            except JournalError as exc:
                self.reporter.fail(f"{ds.name}: {exc}")
                return
            assert isinstance(problems, list)
            for problem in problems:
                self.reporter.event("warning", f"{ds.name}: {problem}")
            # A copy, not the journal's own set: a batch found never created leaves that
            # set as its samples are given back (`_give_back`), and a feed starting after
            # that read them again: the next batch held them twice.
            ds.held_out = set(journal.pending)
            if journal.open:
                self.reporter.event(
                    "info",
                    f"{ds.name}: resuming {counted(len(journal.open), 'batch')} in flight "
                    f"({counted(len(journal.pending), 'sample')}): polled, not sent again",
                )

    def _read_prompts(self, ds: DatasetRun) -> dict[str, Prompt]:
        """The prompts of `ds`'s open batches, read again from its file (a worker thread)."""
        wanted = self.journals[ds.name].pending
        prompts: dict[str, Prompt] = {}
        if wanted:
            for item in iter_prompts(ds.spec.prompts):
                if isinstance(item, Prompt) and item.key in wanted:
                    prompts[item.key] = item
        return prompts

    def _resume(self, ds: DatasetRun, prompts: dict[str, Prompt]) -> None:
        """Follow the batches a killed run left open (polled and collected, never resent)."""
        cap = self.answer_limit.tokens
        for batch in list(self.journals[ds.name].open.values()):
            lines: dict[str, Prompt] = {}
            for key in batch.samples:
                prompt = prompts.get(key)
                if prompt is None:
                    self.reporter.event(
                        "warning",
                        f"{ds.name}: sample {key!r} of batch {batch.batch_id or batch.key} is no "
                        "longer in the prompt file: its answer, if any, is not kept",
                    )
                    continue
                lines[custom_id(ds, key)] = prompt
            self._start(ds, batch, lines, {cid: cap for cid in lines}, None)

    # the loop

    async def run(self) -> None:
        """Send waves until every dataset is finished; on a stop, cancel and collect."""
        loop = asyncio.get_running_loop()
        for ds in self.datasets:
            try:
                prompts = await loop.run_in_executor(self.executor, self._read_prompts, ds)
            except OSError as exc:
                self.reporter.fail(f"{ds.name}: cannot read its prompt file: {exc}")
                continue
            self._resume(ds, prompts)
        signals = self.signals
        while not signals.stopping:
            signals.wake.clear()
            for ds in self.datasets:
                self._settle(ds)
            if all(ds.state.finished for ds in self.datasets) and not self.flights:
                break
            if await self._send_one():
                continue
            await signals.wake.wait()
        if signals.stopping:
            await self._stop()
        else:
            await asyncio.gather(*(f.task for f in self.flights.values() if f.task))

    def _busy(self, ds: DatasetRun) -> bool:
        return any(flight.ds is ds for flight in self.flights.values())

    def _settle(self, ds: DatasetRun) -> None:
        """End a dataset with no batch in flight and nothing more to send (the scheduler's
        rule: reached, all prompts done, or no room for one more)."""
        if ds.state.finished or self._busy(ds):
            return
        self.scheduler.settle(ds)
        self.scheduler.allocator.hand_on_early(ds)

    def _room(self, ds: DatasetRun) -> int:
        """How many requests `ds`'s next batch may take now."""
        most = self.config.batch_max_requests
        budget = ds.budget
        if budget.max_samples is not None:
            most = min(most, budget.max_samples - ds.samples - len(ds.inflight))
        if budget.max_tokens is None or most <= 0:
            return max(0, most)
        cap = self.answer_limit.tokens
        if self.config.budget_mode is BudgetMode.STRICT:
            reserved = sum(entry.max_new_tokens for entry in ds.inflight)
            return max(0, min(most, (budget.max_tokens - ds.tokens - reserved) // cap))
        room = batch_room(budget.max_tokens, ds.tokens, ds.expected, ds.inflight, cap, most)
        if self.spec is not None:
            # A fleet lane: within its planned share; the live lanes make the budget's end.
            # A batch that would land within the plan's margin is theirs too: its answers
            # would all come after the live lanes' taper waited on them (a three-lane run
            # sent one about 4.5 s before its deadline, on a share planned 2 s before; it
            # landed under a second before it, and the API's rounds after it ended late).
            now = time.monotonic()
            if self.land_by is not None and now + self.turnaround(now) > self.land_by:
                return 0
            share = self.allowance
            return max(0, min(room, math.floor(share / self._mean(ds)))) if share > 0 else 0
        last = self._last_wave(ds, budget.max_tokens, room, most)
        if last is not None:
            return last
        if room == 0 and not ds.inflight and self.scheduler.may_send(ds, []):
            return 1  # the mode's lone request: predictive crosses, precise needs room
        return room

    def _last_wave(self, ds: DatasetRun, max_tokens: int, room: int, most: int) -> int | None:
        """The endgame with no live finish: once what the budget leaves, with no batch of
        the dataset out, is under ENDGAME_ANSWERS answers, the waves `batch_room` sizes
        would be a few answers each, every one a full provider round trip. Predictive may
        cross its budget by less than about one answer: its last wave takes at once enough
        to reach the budget at the mean. Precise must stop short, so its rule allows no
        such wave: its last waves stay small, and that is said instead (a live finish ends
        it sooner). Said once, as the dataset's budget note. None: not the endgame, or not
        predictive (strict is sized by its caps)."""
        expected = ds.expected
        mode = self.config.budget_mode
        if self.config.batch_live_finish > 0 or expected.finished == 0 or ds.inflight:
            # With batches out, what they add is known only to within their spread (the
            # margin `batch_room` keeps): what is left is exact once they are back.
            return None
        if mode not in (BudgetMode.PREDICTIVE, BudgetMode.PRECISE):
            return None
        mean = expected.mean(0)
        left = max_tokens - ds.tokens
        if mean <= 0 or left <= 0 or left >= ENDGAME_ANSWERS * mean:
            return None
        count = max(room, min(most, math.ceil(left / mean)))
        if ds.name not in self.endgame:
            self.endgame.add(ds.name)
            head = (
                f"{left:,} tokens left (about {left / mean:.1f} answers) and no live finish "
                "(--batch-live-finish 0): "
            )
            if mode is BudgetMode.PREDICTIVE:
                ds.budget_note = head + (
                    f"the last batch of {counted(count, 'request')} ends the dataset in one "
                    "provider round trip"
                )
            else:
                ds.budget_note = head + (
                    "precise mode stops short, so its last batches are a few answers each, "
                    "a provider round trip each (--batch-live-finish 0.02 ends it live)"
                )
            self.reporter.event("info", f"{ds.name}: {ds.budget_note}")
        return count if mode is BudgetMode.PREDICTIVE else None

    async def _send_one(self) -> bool:
        """Send one batch for the first dataset that has room and prompts; True if one went."""
        signals = self.signals
        if (
            signals.paused
            or not signals.credits.is_set()
            or not signals.space.is_set()
            or self.cost.exhausted(sum(len(ds.inflight) for ds in self.datasets))
        ):
            return False
        sent = False
        for ds in self.datasets:
            if ds.state.finished or ds.on_hold or ds.halted or ds.queue is None:
                continue
            live = self._finishing_live(ds)
            if live is None:
                continue  # its last batches come back first
            if live:
                sent = self._send_live(ds) or sent
                continue
            if len(self.flights) >= self.config.batch_in_flight:
                continue
            room = self._room(ds)
            if room <= 0:
                if self.spec is None:  # a fleet lane's room is its planned share's too
                    self.scheduler.note_small_budget(ds)
                continue
            wave = await self._take(ds, room)
            if wave:
                await self._launch(ds, wave)
                return True
        return sent

    def _finishing_live(self, ds: DatasetRun) -> bool | None:
        """Whether `ds` sends its last requests live (`batch_live_finish`): True once what
        its budget leaves, less what its batches in flight are expected to add, is within
        that share; None while it is, but batches of it are still out (it sends nothing
        until they are back: a live request beside them would be sized blind); False for
        batches as usual."""
        if ds.name in self.live:
            return True
        if self.spec is not None:
            return False  # a fleet's live lanes finish it
        share, budget = self.config.batch_live_finish, ds.budget.max_tokens
        if share <= 0 or budget is None:
            return False
        pending = ds.expected.mean(len(ds.inflight)) * len(ds.inflight)
        if budget - ds.tokens - pending > share * budget:
            return False
        if ds.inflight:
            return None
        self.live.add(ds.name)
        self.reporter.event(
            "info",
            f"{ds.name}: {budget - ds.tokens:,} tokens left: the rest goes as live requests "
            f"(--batch-live-finish {share:g}), to end as close to the budget as a live run",
        )
        return True

    def _send_live(self, ds: DatasetRun) -> bool:
        """Start live requests of `ds` while the pool and its budget's rule allow; True if any."""
        assert ds.queue is not None
        returned = ds.given_back
        sent = False
        while self.pool.free and self.scheduler.may_send(ds, ds.inflight):
            if returned:
                prompt, ids = returned.popleft()
            elif not ds.queue.empty():
                prompt, ids = ds.queue.get_nowait()
            else:
                break
            self.send_live(ds, prompt, ids)
            sent = True
        return sent

    async def _take(self, ds: DatasetRun, count: int) -> list[Queued]:
        """Up to `count` prompts of `ds`: those given back first, then the feed's, waiting
        for the feed while it has more to read."""
        assert ds.queue is not None
        returned = ds.given_back
        wave: list[Queued] = []
        while len(wave) < count and not self.signals.stopping:
            if returned:
                wave.append(returned.popleft())
            elif not ds.queue.empty():
                wave.append(ds.queue.get_nowait())
            elif ds.producer_done:
                break
            else:
                self.signals.wake.clear()
                await self.signals.wake.wait()  # the feed sets it as it puts
        return wave

    async def _launch(self, ds: DatasetRun, wave: list[Queued]) -> None:
        """Journal the batch, then hand it to its flight (upload, create, poll, collect)."""
        limit = int(self.config.batch_max_mb * 2**20)
        lines: dict[str, Prompt] = {}
        caps: dict[str, int] = {}
        data: list[bytes] = []
        size = 0
        for index, (prompt, ids) in enumerate(wave):
            cap = self.request_cap(prompt, ids)
            cid = custom_id(ds, prompt.key)
            line = self.client.request_line(cid, prompt.messages, cap)
            if size + len(line) > limit and data:
                ds.given_back.extendleft(reversed(wave[index:]))
                break
            data.append(line)
            size += len(line)
            lines[cid] = prompt
            caps[cid] = cap
        try:
            batch = await self._journal(
                self.journals[ds.name].open_batch, [p.key for p in lines.values()]
            )
        except (JournalError, OSError) as exc:
            ds.given_back.extendleft(reversed(wave))
            self.reporter.fail(f"{ds.name}: cannot write its batch journal: {exc}")
            return
        assert isinstance(batch, OpenBatch)
        ds.state = DatasetState.ACTIVE
        if self.spec is not None:
            self.allowance -= len(lines) * self._mean(ds)
        self._start(ds, batch, lines, caps, b"".join(data))

    def _start(
        self,
        ds: DatasetRun,
        batch: OpenBatch,
        lines: dict[str, Prompt],
        caps: dict[str, int],
        data: bytes | None,
    ) -> None:
        now = time.monotonic()
        entries = {cid: InFlight(now, caps[cid], ages=False) for cid in lines}
        ds.inflight.extend(entries.values())
        flight = Flight(ds, batch, lines, entries, data, started=now, fresh=data is not None)
        self.flights[batch.key] = flight
        self._show(ds)
        flight.task = asyncio.create_task(self._fly(flight))

    # one batch

    async def _retrying(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """`call` until it works, waiting between tries that may work again; a refused key
        or a refused request ends the run (said once), and is raised again here."""
        attempt = 0
        while True:
            try:
                return await call()
            except RequestFailed as exc:
                if exc.kind == RequestFailed.AUTH or not exc.retry:
                    self.reporter.fail(f"{what}: {exc.reason}")
                    raise
                if self.signals.aborting:
                    raise
                wait = exc.retry_after or BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
                if attempt in (0, 5) or attempt % 50 == 0:
                    self.reporter.event("warning", f"{what}: {exc.reason} (retrying)")
                attempt += 1
                await asyncio.sleep(min(wait, STOP_POLL_S) if self.stopped.is_set() else wait)

    async def _fly(self, flight: Flight) -> None:
        ds, batch = flight.ds, flight.batch
        journal = self.journals[ds.name]
        try:
            if batch.batch_id is None and not await self._create(flight):
                return
            state = await self._poll(flight)
            if state is None:
                return  # aborted: the batch stays open in the journal for the next run
            if state.status == "completed" and flight.fresh:
                self.turnarounds.append(time.monotonic() - flight.started)
            await self._collect(flight, state)
            self._note(await self._journal(journal.close, batch, state.status))
        except RequestFailed:
            return  # said by _retrying; the batch stays open in the journal
        except (JournalError, OSError) as exc:
            self.reporter.fail(f"{ds.name}: cannot write its batch journal: {exc}")
        finally:
            _drop(ds, flight.entries.values())
            flight.entries.clear()
            self.flights.pop(batch.key, None)
            self._show(ds)
            self.signals.wake.set()

    def _note(self, problem: object) -> None:
        """Say a journal's failed compaction (`BatchJournal.close`), if there was one."""
        if isinstance(problem, str):
            self.reporter.event("warning", problem)

    async def _create(self, flight: Flight) -> bool:
        """Upload and create the batch (a resumed intent: find it); False when it never was."""
        ds, batch = flight.ds, flight.batch
        journal = self.journals[ds.name]
        if flight.data is None:  # an intent a killed run left: was it created?
            found = await self._retrying(
                f"{ds.name}: looking up batch {batch.key}",
                lambda: self.client.find(self.url, BATCH_KEY, batch.key),
            )
            if found is None:
                self._note(await self._journal(journal.close, batch, "never created"))
                self.reporter.event(
                    "info",
                    f"{ds.name}: batch {batch.key} was never created at the provider (the "
                    f"last run ended first): its {counted(len(flight.prompts), 'sample')} are "
                    "sent again",
                )
                self._give_back(flight, set(flight.prompts), "its batch was never created")
                return False
            assert isinstance(found, BatchState)
            await self._journal(journal.created, batch, found.id)
            return True
        data = flight.data
        file_id = await self._retrying(
            f"{ds.name}: uploading a batch", lambda: self.client.upload(self.url, data)
        )
        metadata = {BATCH_KEY: batch.key}
        if self.config.hooks.sim_dataset_header:
            metadata[SIM_DATASET_KEY] = ds.name
        state = await self._retrying(
            f"{ds.name}: creating a batch",
            lambda: self.client.create(self.url, str(file_id), metadata),
        )
        assert isinstance(state, BatchState)
        await self._journal(journal.created, batch, state.id)
        flight.data = None
        flight.state = state
        self._show(ds)
        self.reporter.event(
            "info",
            f"{ds.name}: batch {state.id} created with {counted(len(flight.prompts), 'request')}",
        )
        return True

    async def _poll(self, flight: Flight) -> BatchState | None:
        """Poll until the batch ends (a stop cancels it first); None when aborted."""
        ds, batch = flight.ds, flight.batch
        assert batch.batch_id is not None
        batch_id = batch.batch_id
        while True:
            if self.signals.aborting:
                return None
            if self.stopped.is_set() and not flight.cancel_sent:
                flight.cancel_sent = True
                await self._retrying(
                    f"{ds.name}: cancelling batch {batch_id}",
                    lambda: self.client.cancel(self.url, batch_id),
                )
            state = await self._retrying(
                f"{ds.name}: polling batch {batch_id}",
                lambda: self.client.retrieve(self.url, batch_id),
            )
            assert isinstance(state, BatchState)
            flight.state = state
            self._show(ds)
            if state.ended:
                return state
            if self.stopped.is_set():
                await asyncio.sleep(STOP_POLL_S)
            else:
                await wait_event(self.stopped, self.config.batch_poll_s)

    async def _collect(self, flight: Flight, state: BatchState) -> None:
        """Turn an ended batch's output lines into records, once each; give back the rest."""
        ds = flight.ds
        per_line = response_limit(self.answer_limit.tokens) // 8
        limit = max(1 << 20, len(flight.prompts) * per_line)
        results = await self._retrying(
            f"{ds.name}: downloading batch {state.id}",
            lambda: self.client.results(self.url, state, set(flight.prompts), limit),
        )
        assert isinstance(results, BatchLines)
        for problem in results.problems[:5]:
            self.reporter.event("warning", f"{ds.name}: {problem}")
        if len(results.problems) > 5:
            self.reporter.event(
                "warning", f"{ds.name}: {len(results.problems) - 5} more such lines skipped"
            )
        unanswered = {cid for cid in flight.prompts if cid not in results.answers}
        _drop(ds, [flight.entries.pop(cid) for cid in unanswered if cid in flight.entries])
        # Each answer leaves the in-flight list as its record is written (the budget never
        # counts it twice); in runs of COLLECT_RUN, as a list of 50,000 entries would be
        # searched once for each if they left one by one.
        done: list[InFlight] = []
        for cid, generation in results.answers.items():
            prompt = flight.prompts[cid]
            generation = self._priced(ds, generation)
            generation = await self.feeder.attach_ids(generation, prompt.messages)
            await self.sink.keep(ds, prompt, generation, self.url)
            self.tokens += generation.completion_tokens
            self.answers += 1
            self.spent += generation.cost or 0.0
            entry = flight.entries.pop(cid, None)
            if entry is not None:
                done.append(entry)
            if len(done) >= COLLECT_RUN:
                _drop(ds, done)
                done = []
        _drop(ds, done)
        await self.sink.sync()
        failed = {cid for cid in unanswered if cid in results.failures}
        reasons = sorted({results.failures[cid] for cid in failed})[:3]
        unanswered -= self._give_up(flight, unanswered, results.failures)
        answered = len(flight.prompts) - len(unanswered)
        note = f"{ds.name}: batch {state.id} {state.status}: {counted(answered, 'answer')} kept"
        if unanswered:
            why = f" ({'; '.join(reasons)})" if reasons else ""
            note += f", {counted(len(unanswered), 'sample')} given back{why}"
        self.reporter.event("info" if not unanswered else "warning", note)
        self._give_back(flight, unanswered, state.status)

    def _priced(self, ds: DatasetRun, generation: Generation) -> Generation:
        """`generation` at the batch price (the provider's `usage.cost`, else the batch share
        of `--price`), its saving against the live price added to `ds.cost_saved` (the
        live price: `--price`, else the provider's cost over the batch share)."""
        share = self.config.batch_price_share
        live = self.cost.price(dataclasses.replace(generation, cost=None))
        if self.spec is not None:
            # A fleet's batch lane is priced at its batch price (`price=` of its lane).
            listed = self.cost.price(dataclasses.replace(generation, cost=None), self.url)
            live = listed / share if listed is not None and share > 0 else None
            if generation.cost is None and listed is not None:
                generation = dataclasses.replace(generation, cost=listed)
        if generation.cost is None:
            if live is None:
                return generation
            generation = dataclasses.replace(generation, cost=live * share)
        elif live is None and share > 0:
            live = generation.cost / share
        if live is not None and generation.cost is not None:
            ds.cost_saved = (ds.cost_saved or 0.0) + live - generation.cost
        return generation

    def _give_up(self, flight: Flight, cids: set[str], failures: dict[str, str]) -> set[str]:
        """The samples of `cids` that failed once too often (`--max-retries`, as live),
        noted in errors.jsonl: a line a provider always refuses is not sent forever. A
        line the batch never ran (expired, cancelled) does not count against its sample."""
        ds = flight.ds
        given_up: set[str] = set()
        for cid in cids:
            reason = failures.get(cid, "its output line could not be read")
            if reason.startswith(UNRUN):
                continue
            tries = self.attempts[cid] = self.attempts.get(cid, 0) + 1
            if tries <= self.config.max_retries:
                continue
            given_up.add(cid)
            self.attempts.pop(cid, None)
            ds.errors += 1
            ds.quality.error(reason)
            failure = RequestFailed(reason, retry=False)
            self.sink.note_failure(ds, flight.prompts[cid], failure, tries)
            if ds.errors <= 5 or ds.errors % 100 == 0:
                self.reporter.event(
                    "warning",
                    f"{ds.name}: sample {flight.prompts[cid].sample_id!r} failed in "
                    f"{counted(tries, 'batch')}: {reason}",
                )
        return given_up

    def _give_back(self, flight: Flight, cids: set[str], why: str) -> None:
        """Put samples with no answer back at the front of their dataset's queue (the next
        run's, after a stop)."""
        del why  # said by the caller
        ds = flight.ds
        back = [(flight.prompts[cid], None) for cid in flight.prompts if cid in cids]
        back = [(p, ids) for p, ids in back if p.key not in ds.done]
        if self.signals.stopping:
            return  # free in the journal once closed: the next run's feed reads them again
        ds.given_back.extendleft(reversed(back))
        self.signals.wake.set()

    def _show(self, ds: DatasetRun) -> None:
        """The dataset's batches on the panel and in progress.json (`ds.batches`: each one's
        status, the provider's counts, created and expiry times) and its message line."""
        flights = [f for f in self.flights.values() if f.ds is ds]
        ds.batches = tuple(
            f.state  # what the provider said (a BatchView), else what is known before it
            if f.state is not None
            else BatchView(f.batch.batch_id or f.batch.key, "creating", total=len(f.prompts))
            for f in flights[:MAX_BATCHES]
        )
        states = [f.state for f in flights if f.state is not None]
        if not states:
            return
        done = sum(s.completed for s in states)
        total = sum(s.total for s in states)
        kinds = sorted({s.status for s in states})
        ds.message = (
            f"{counted(len(states), 'batch')} ({', '.join(kinds)}): "
            f"{done:,} of {total:,} {BATCH_COUNTS_SAID}"
        )

    # the fleet planner's view

    def _mean(self, ds: DatasetRun) -> float:
        """The answer `ds`'s next batch is sized (and its share taken) at."""
        return ds.expected.mean(0) or float(self.answer_limit.tokens)

    def mean_answer(self) -> float:
        """Its mean answer so far; before any of its own, the datasets' (the live lanes'
        answers, one model's lengths), and the answer cap before any at all."""
        if self.answers:
            return self.tokens / self.answers
        seen = [ds.expected for ds in self.datasets if ds.expected.finished]
        if seen:
            return sum(e.total for e in seen) / sum(e.finished for e in seen)
        return float(self.answer_limit.tokens)

    def outstanding(self) -> float:
        """Completion tokens its batches in flight are expected to add."""
        return sum(
            len(f.entries) * (f.ds.expected.mean(0) or self.mean_answer())
            for f in self.flights.values()
        )

    def turnaround(self, now: float) -> float:
        """How long a batch of it takes: the mean of those seen end, else its lane's
        `turnaround=` (else the providers' 24 h window); never less than the age of its
        oldest batch still out (a batch late says the lane is slower than it was)."""
        assert self.spec is not None
        if self.turnarounds:
            expected = sum(self.turnarounds) / len(self.turnarounds)
        elif self.spec.turnaround_s is not None:
            expected = self.spec.turnaround_s
        else:
            expected = DEFAULT_TURNAROUND_S
        ages = [now - f.started for f in self.flights.values()]
        return max([expected, *ages])

    def planned(self, now: float) -> Lane:
        """Itself as the planner sees it: nothing before its turnaround, then a wave of
        what its batches in flight at most carry each turnaround (`batch_in_flight`
        batches of `batch_max_requests` answers at its mean), at its batch price."""
        assert self.spec is not None
        turnaround = max(self.turnaround(now), 1e-3)
        wave = self.config.batch_in_flight * self.config.batch_max_requests * self.mean_answer()
        price = self.spent / self.tokens if self.spent > 0 else self.spec.price_per_token
        return Lane(self.spec.name, wave / turnaround, price, turnaround, wave=wave)

    # stopping

    async def _stop(self) -> None:
        """Cancel the batches in flight and collect what they finished, within the grace
        period; a second stop (or the grace running out) leaves them to the next run."""
        flights = [f for f in self.flights.values() if f.task is not None]
        if not flights:
            return
        self.reporter.event(
            "info",
            f"stopping: cancelling {counted(len(flights), 'batch')} in flight; the provider "
            "bills the requests each finished before the cancel, and those are downloaded "
            f"and kept (up to {self.config.grace_s:g} s; signal again to leave them to the "
            "next run, which collects them)",
        )
        for ds in self.datasets:
            if not ds.state.finished and self._busy(ds):
                ds.state = DatasetState.DRAINING
        self.stopped.set()
        tasks = [f.task for f in flights if f.task is not None]
        deadline = time.monotonic() + self.config.grace_s
        while any(not t.done() for t in tasks) and not self.signals.aborting:
            self.signals.wake.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await wait_event(self.signals.wake, min(remaining, 0.5))
        left = [t for t in tasks if not t.done()]
        for task in left:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if left:
            self.reporter.event(
                "warning",
                f"left {counted(len(left), 'batch')} open in the journal: the same command "
                "collects them",
            )
