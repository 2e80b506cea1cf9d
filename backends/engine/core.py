"""The Engine façade: prompts in, one record per completed response out.

It wires the parts together and runs the dispatch loop; each part is its own module:
`scheduler` (which dataset a free slot goes to), `slots` (the pool and its AIMD limit),
`allocator` (the total budget's split), `runner` (servers, retries), `sink` (records on
disk), `views` (progress.json, history), `feeder` (prompts, tokenized), `cost`, `shutdown`
(drain and abort), and the `clients` package (the servers' APIs).

Guarantees: a response is written (one `write()` of a whole line) before it counts; a
sample is sent at most once at a time and written at most once; failures never count;
cancellation can only interrupt a request before its response is complete.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gen_tui.backends.budget.crossing import crossing_cap
from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.clients import BatchClient, FleetClient, InferenceClient, client_for
from gen_tui.backends.config.commands import (
    EngineCommand,
    Pause,
    SetBudget,
    SetPlanTarget,
    Stop,
)
from gen_tui.backends.config.run import EngineConfig, EngineError
from gen_tui.backends.engine.allocator import Allocator
from gen_tui.backends.engine.answer_cap import AnswerCap, prompt_bound
from gen_tui.backends.engine.batch_lane import BatchLane
from gen_tui.backends.engine.context import AnswerLimit, RunContext
from gen_tui.backends.engine.conversation import ConversationRunner
from gen_tui.backends.engine.cost import CostMeter
from gen_tui.backends.engine.dataset import DatasetRun
from gen_tui.backends.engine.dataset_progress import dataset_snapshot
from gen_tui.backends.engine.feeder import Feeder
from gen_tui.backends.engine.fleet import FleetPlanner
from gen_tui.backends.engine.overtime import OvertimeWatch
from gen_tui.backends.engine.report import Alert, Event, Reporter
from gen_tui.backends.engine.runner import RequestRunner, Server
from gen_tui.backends.engine.scheduler import Scheduler
from gen_tui.backends.engine.shutdown import Shutdown
from gen_tui.backends.engine.signals import RunSignals
from gen_tui.backends.engine.sink import DatasetSink
from gen_tui.backends.engine.slots import SlotPool
from gen_tui.backends.engine.telemetry import ServerTelemetry
from gen_tui.backends.engine.tuning import AutoConcurrency
from gen_tui.backends.figures import counted
from gen_tui.backends.plan.control import PlanTarget
from gen_tui.backends.progress.snapshot import BudgetEvent, DatasetState, RunSnapshot
from gen_tui.backends.store.conversations import Turns, turn_count, turn_key
from gen_tui.backends.store.manifest import template_sha256
from gen_tui.backends.store.prompts import Prompt


class Engine:
    """Run the datasets of one :class:`EngineConfig` to their budgets.

    `on_snapshot` receives a :class:`RunSnapshot` every `snapshot_interval_s`; `on_event`
    receives (level, message) for things a person should read: resume summaries, skipped
    prompt lines, servers going away, budget crossings. `on_budget` receives the crossings
    and finishes again as :class:`BudgetEvent` data, for a UI to announce without parsing.
    `client` replaces the client `config.api` names (a test's scripted one, say).
    `on_alert` receives what `[alerts]` may ping about (budget reached, failed, out of
    credits, disk full; the run's end is the caller's to say).
    """

    def __init__(
        self,
        config: EngineConfig,
        on_snapshot: Callable[[RunSnapshot], None] | None = None,
        on_event: Event | None = None,
        on_budget: Callable[[BudgetEvent], object] | None = None,
        *,
        client: InferenceClient | None = None,
        on_alert: Alert | None = None,
    ) -> None:
        if not config.datasets:
            raise EngineError("no datasets selected")
        if not config.server_urls:
            raise EngineError("no server URL given")
        self.config = config
        self.client = client if client is not None else client_for(config)
        self._on_snapshot = on_snapshot
        self._caps = AnswerCap(given=config.max_new_tokens_given)
        self._limit = AnswerLimit(self._caps.budget_cap)
        cap, mode = float(self._limit.tokens), config.budget_mode
        self._datasets = [
            DatasetRun(spec, config.output_dir / spec.name, cap, mode, config.turns is Turns.ALL)
            for spec in config.datasets
        ]
        self._cut_said: set[str] = set()
        """Datasets whose lone crossing answer's cut has been said (once each)."""
        self._signals = RunSignals()
        self._report = Reporter(on_event, on_budget, self._signals.request_stop, on_alert)
        run = RunContext(config, self._datasets, self._signals, self._report, self._limit)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gen-tui-tokenize")
        self._pool = SlotPool(config.max_concurrency)
        self._auto = AutoConcurrency(run, self._pool) if config.auto_concurrency else None
        self._cost = CostMeter(config, self._datasets)
        self._feeder = Feeder(run, self._executor, tokenize=self.client.needs_input_ids)
        self._allocator = Allocator(run, self._feeder.reopen)
        self._scheduler = Scheduler(run, self._allocator, lambda: self._pool.limit)
        self._sink = DatasetSink(run, self._cost)
        self._runner = RequestRunner(run, self.client, self._pool, self._feeder, self._sink)
        self._conversations = ConversationRunner(run, self._runner, self._feeder, self._request_cap)
        self.planner = FleetPlanner(run, self._runner, self._cost) if config.planned else None
        """The fleet planner, in a run over lanes or with a deadline (None otherwise)."""
        self._overtime = (
            OvertimeWatch(run, self.planner, self._runner) if self.planner is not None else None
        )
        self._telemetry = ServerTelemetry(
            run,
            self.client,
            [server.url for server in self._runner.servers],
            self._auto.tune if self._auto is not None else None,
        )
        if self._auto is not None:
            self._auto.attach(self._telemetry)
        self._started = time.monotonic()
        self._host = socket.gethostname()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opened = False
        self._shutdown = Shutdown(run, self._pool, self._runner)
        self._lane: BatchLane | None = None
        """`--api openai-batch`: batches replace the dispatch loop (see batch_lane.py)."""
        batch_client: InferenceClient | None = self.client
        batch_lane = config.batch_lane
        if batch_lane is not None and isinstance(self.client, FleetClient):
            # A fleet's batch lane (`--lane NAME=URL,api=openai-batch`): it runs beside the
            # dispatch loop, sending the share the planner gives it as batches.
            batch_client = self.client.api(batch_lane.url)
        if isinstance(batch_client, BatchClient):
            self._lane = BatchLane(
                run,
                batch_client,
                self._feeder,
                self._sink,
                self._scheduler,
                self._cost,
                self._executor,
                self._request_cap,
                self._pool,
                self._start_request,
                batch_lane,
            )
            if self.planner is not None:
                self.planner.batch = self._lane

    # control: call on the engine's loop, or send a command from another thread

    def request_stop(self) -> None:
        """First call: stop dispatching and drain. Second call: abort in-flight requests."""
        self._signals.request_stop()

    def set_paused(self, paused: bool) -> None:
        """Hold or release dispatch; in-flight requests carry on either way."""
        self._signals.paused = paused
        for ds in self._datasets:
            if ds.state is DatasetState.ACTIVE and paused:
                ds.state = DatasetState.PAUSED
            elif ds.state is DatasetState.PAUSED and not paused and not ds.on_hold:
                ds.state = DatasetState.ACTIVE
        self._signals.wake.set()

    def _dataset(self, name: str) -> DatasetRun:
        found = next((ds for ds in self._datasets if ds.name == name), None)
        if found is None:
            raise EngineError(f"{name} is not in this run")
        return found

    def pause_dataset(self, name: str, paused: bool) -> None:
        """Hold or release one dataset's dispatch; the others go on (its in-flight finish)."""
        ds = self._dataset(name)
        ds.on_hold = paused
        if ds.state in (DatasetState.ACTIVE, DatasetState.WAITING) and paused:
            ds.state = DatasetState.PAUSED
        elif ds.state is DatasetState.PAUSED and not paused and not self._signals.paused:
            ds.state = DatasetState.ACTIVE
        self._signals.wake.set()

    def stop_dataset(self, name: str) -> None:
        """Stop one dataset: nothing more is sent for it, its in-flight answers finish, and
        it ends as stopped; the run goes on with the others (and ends when they do)."""
        ds = self._dataset(name)
        ds.halted = True
        if not ds.state.finished and ds.inflight:
            ds.state = DatasetState.DRAINING
        self._scheduler.settle(ds)
        self._signals.wake.set()

    def set_budget(self, name: str, max_tokens: int | None, max_samples: int | None) -> None:
        """Change a dataset's budget mid-run; a dataset done at its old budget starts again,
        and so does one stopped alone (`Stop(dataset=...)`): a new budget is `r`'s resume."""
        ds = next((d for d in self._datasets if d.name == name), None)
        if ds is not None and ds.halted:
            ds.halted = ds.on_hold = False
            if ds.state is DatasetState.STOPPED:
                ds.state = DatasetState.DONE  # reopened below when the budget leaves room
        self._allocator.set_budget(name, max_tokens, max_samples)

    def apply(self, command: EngineCommand) -> None:
        """Carry out a command on the engine's loop (`send` brings one from another thread)."""
        match command:
            case Stop(dataset=None):
                self.request_stop()
            case Stop(dataset=str(name)):
                self.stop_dataset(name)
            case Pause(paused=paused, dataset=None):
                self.set_paused(paused)
            case Pause(paused=paused, dataset=str(name)):
                self.pause_dataset(name, paused)
            case SetBudget(dataset=name, max_tokens=tokens, max_samples=samples):
                self.set_budget(name, tokens, samples)
            case SetPlanTarget(deadline=deadline, max_cost=cost, written_at=at):
                if self.planner is None:
                    self._report.event("warning", "this run has no plan: the target is ignored")
                    return
                try:
                    self.planner.retarget(PlanTarget(deadline, cost, at))
                except ValueError as exc:  # checked by the dialog; a bad one is said, not raised
                    self._report.event("warning", f"plan target ignored: {exc}")

    def send(self, command: EngineCommand) -> None:
        """Hand a command to the engine's loop from any thread (the TUI's, say)."""
        if self._loop is None:
            raise EngineError("the engine is not running")
        self._loop.call_soon_threadsafe(self.apply, command)

    # reporting

    @property
    def aborted(self) -> bool:
        """Whether the run ended by aborting in-flight requests (a second signal, or the
        drain's grace running out)."""
        return self._shutdown.aborted

    def active_seconds(self) -> float:
        """Wall time from the first dispatch to the last completion (or now)."""
        return self._pool.active_seconds()

    def utilisation(self) -> float:
        """Busy slot-seconds over available slot-seconds, first dispatch to last completion."""
        return self._pool.utilisation()

    def total_cost(self) -> float:
        return self._cost.total()

    def snapshot(self) -> RunSnapshot:
        """The whole run now: every dataset, the pool, the servers (`run` returns the last)."""
        now_mono = time.monotonic()
        now = time.time()
        board = self._telemetry.gpus
        self._pool.mark_busy()
        elapsed = max(now_mono - self._started, 1e-9)
        plan = self.planner.view if self.planner is not None else None
        datasets = [
            dataset_snapshot(ds, self.config, self._host, now_mono, now, plan)
            for ds in self._datasets
        ]
        return RunSnapshot(
            datasets=tuple(datasets),
            concurrency=self._pool.concurrency,
            inflight=len(self._pool),
            utilisation=self.utilisation(),
            active_s=self.active_seconds(),
            elapsed_s=elapsed,
            stopping=self._signals.stopping,
            paused=self._signals.paused,
            servers=self._runner.statuses(),
            concurrency_limit=int(self._pool.limit),
            max_total_tokens=self.config.max_total_tokens,
            server_metrics=dict(self._telemetry.latest),
            server_workers=dict(self._telemetry.workers),
            concurrency_auto=self._auto.reason if self._auto is not None else None,
            gpus=tuple((gpu, board.history(gpu.index)[0]) for gpu in board.gpus),
        )

    async def _ticker(self) -> None:
        every = max(1, round(self.config.progress_interval_s / self.config.snapshot_interval_s))
        tick = 0
        while True:
            await asyncio.sleep(self.config.snapshot_interval_s)
            tick += 1
            snapshot = self.snapshot()
            if self._on_snapshot is not None:
                self._on_snapshot(snapshot)
            if tick % every == 0:
                self._sink.write_progress(snapshot)
                await self._sink.sync()

    # setup

    async def _learn_caps(self) -> None:
        """Ask the servers how long an answer may be, before anything reads the run's cap
        (the length model's prior, the strict budget's reservations)."""
        self._caps = await self._runner.answer_cap()
        self._limit.tokens = self._caps.budget_cap
        self._report.event("info", self._caps.describe())

    def _request_cap(self, prompt: Prompt, ids: list[int] | None) -> int:
        """This prompt's `max_new_tokens`: the run's rule at the prompt's length, counted by
        the tokenizer where one ran, else bounded from its bytes (see answer_cap.py)."""
        if ids is not None:
            tokens = len(ids)
        elif prompt.tokens is not None:
            tokens = prompt.tokens
        else:
            tokens = prompt_bound(prompt.messages)
        return self._caps.for_prompt(tokens)

    def _crossing_cap(self, ds: DatasetRun, cap: int) -> int:
        """`cap`, or the lone crossing answer's cut (budget/crossing.py), said once."""
        config = self.config
        cut = crossing_cap(
            config.crossing_answer,
            config.budget_mode,
            ds.budget,
            ds.tokens,
            ds.inflight,
            ds.model,
            cap,
        )
        if cut < cap and ds.name not in self._cut_said:
            self._cut_said.add(ds.name)
            room = (ds.budget.max_tokens or 0) - ds.tokens
            self._report.event(
                "info",
                f"{ds.name}: its answers sent alone now stop at the room left + one mean "
                f"answer ({cut:,} tokens of {cap:,} now, {room:,} of room), so it crosses "
                "its budget by at most that (--crossing-answer whole: never cut)",
            )
        return cut

    async def _open_all(self) -> None:
        await self._sink.open_all(self._executor, template_sha256(self._feeder.tokenizer))
        self._allocator.rebalance()
        for ds in self._datasets:
            if ds.samples:
                self._report.event(
                    "info",
                    f"{ds.name}: resuming with {counted(ds.samples, 'record')}, "
                    f"{counted(ds.tokens, 'token')} on disk",
                )
            at_budget = ds.reached or self._scheduler.ended_short(ds)
            if at_budget and not ds.history:  # a conversation begun is finished first
                ds.state = DatasetState.DONE
                ds.message = "already at its budget: nothing to do"
                self._report.event(
                    "info",
                    f"{ds.name}: already at its budget ({counted(ds.tokens, 'token')}, "
                    f"{counted(ds.samples, 'sample')}); nothing to do",
                )
            else:
                ds.state = DatasetState.WAITING
                self._feeder.open_queue(ds)

    # dispatch

    async def _dispatch(self) -> None:
        signals = self._signals
        while True:
            # Cleared before looking, not before waiting: a wake raised while looking (a
            # dataset running out of prompts hands its share to ones already done) must
            # end the wait below, or the run waits forever with nothing in flight.
            signals.wake.clear()
            self._pool.mark_busy()
            if signals.stopping:
                return
            if all(ds.state.finished for ds in self._datasets):
                return
            if not self._pool.tasks and self._spent_out(0):
                self._cost.finish(self._report)
                return
            if (
                not signals.paused
                and signals.credits.is_set()
                and signals.space.is_set()
                and self._pool.free
                and not self._spent_out(len(self._pool))
            ):
                ds = self._scheduler.pick()  # settles the datasets that are done, too
                server = self._runner.reserve() if ds is not None else None
                if ds is not None and server is not None:  # a lane has room and share left
                    self._launch(ds, server)
                    continue
                if all(ds.state.finished for ds in self._datasets):
                    return
            await signals.wake.wait()

    def _spent_out(self, inflight: int) -> bool:
        """Whether the spend cap ends the run. Not a planned run's with a free lane: its plan
        gives the priced lanes nothing past the cap and the box goes on (a deadline the cap
        cannot pay is met late, as the plan says); it ended at the cap with its budgets at
        12% and 17% and its box idle."""
        if self.planner is not None and self.planner.has_free_lane():
            return False
        return self._cost.exhausted(inflight)

    def _launch(self, ds: DatasetRun, server: Server) -> None:
        """Start one request of `ds` in a free slot; the budget sees it in flight at once."""
        assert ds.queue is not None
        if ds.given_back:  # a fleet's batch lane gave these back (expired, cancelled, failed)
            prompt, ids = ds.given_back.popleft()
        else:
            prompt, ids = ds.queue.get_nowait()
        if prompt.key in ds.history:  # --turns all: a conversation begun on disk goes on
            ds.begun_queued -= 1
        self._start_request(ds, prompt, ids, server)

    def _start_request(
        self,
        ds: DatasetRun,
        prompt: Prompt,
        ids: list[int] | None,
        server: Server | None = None,
    ) -> None:
        """Send `prompt` live in a free slot (the dispatch loop's, or the batch lane's live
        finish); the budget sees it in flight at once. `server`: the one whose slot the
        dispatcher took (`RequestRunner.reserve`); None: the runner picks."""
        ds.state = DatasetState.ACTIVE
        cap = self._request_cap(prompt, ids)
        cut = cap if self.config.turns is Turns.ALL else self._crossing_cap(ds, cap)
        taken = server
        if server is not None and self.planner is not None and self.config.turns is not Turns.ALL:
            # Its dataset's last answer, sent alone (nothing else of it out, and the room
            # left within its cap), or any request near the deadline: the lane that delivers
            # it soonest under the cap, not the slow box (backends/engine/fleet.py `route`).
            room = None if ds.budget.max_tokens is None else ds.budget.max_tokens - ds.tokens
            lone = not ds.inflight and room is not None and room <= cap
            server = self.planner.route(server, cut, lone, ds.model.known_mean())
        entry = InFlight(time.monotonic(), cut, crossing=cut < cap)  # a turn keeps its cap
        if server is not taken:
            # Moved by the route, which let it onto its lane at its cap under the spend cap:
            # counted so until it lands (`FleetPlanner.committed`, a priced lane's), not at
            # the lane's mean.
            entry.expect = float(cut)
        ds.inflight.append(entry)
        if self.config.turns is Turns.ALL:  # a whole conversation, turn by turn
            # Its turns to come count from now, not once its task first runs: conversations
            # launched in one pass of the dispatch loop each saw the others as one turn.
            turns = turn_count(prompt.messages)
            on_disk = sum(
                1 for turn in range(1, turns + 1) if turn_key(prompt.key, turn) in ds.done
            )
            entry.turns_left = max(0, turns - on_disk - 1)
            if server is not None:  # its turns pick their servers themselves
                server.outstanding -= 1
            task = asyncio.create_task(self._conversations.run(ds, entry, prompt))
        else:
            task = asyncio.create_task(self._runner.run(ds, entry, prompt, ids, cut, server))
        self._pool.add(task, ds.name)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._pool.remove(task)
        if not task.cancelled() and task.exception() is not None:
            self._report.event("error", f"internal error in a request: {task.exception()!r}")
        self._signals.wake.set()

    async def run(self) -> RunSnapshot:
        """Run to completion (or until stopped); returns the final snapshot."""
        self._loop = asyncio.get_running_loop()
        ticker: asyncio.Task[None] | None = None
        telemetry: asyncio.Task[None] | None = None
        planning: asyncio.Task[None] | None = None
        overtime: asyncio.Task[None] | None = None
        drains: asyncio.Task[None] | None = None
        try:
            async with self.client:
                await self._runner.check_servers()
                drains = asyncio.create_task(self._runner.watch_drains())
                if self._auto is not None:
                    await self._auto.limit(self._runner)
                telemetry = asyncio.create_task(self._telemetry.run())
                await self._learn_caps()
                await self._feeder.load_tokenizer()
                await self._open_all()
                if self._lane is not None:
                    await self._lane.open()
                self._opened = True
                ticker = asyncio.create_task(self._ticker())
                if self.planner is not None:
                    planning = asyncio.create_task(self.planner.run())
                if self._overtime is not None:
                    overtime = asyncio.create_task(self._overtime.run())
                for ds in self._datasets:
                    if not ds.state.finished:
                        self._feeder.start(ds)
                if self._lane is not None and self._lane.spec is not None:
                    # A fleet's batch lane beside its live lanes: both take from the feed.
                    await asyncio.gather(self._lane.run(), self._dispatch())
                elif self._lane is not None:
                    await self._lane.run()  # on a stop, it cancels and collects its batches
                else:
                    await self._dispatch()
                if self._lane is None or self._pool.tasks:  # the lane's live finish, if any
                    if self._signals.stopping:
                        await self._shutdown.drain()
                    else:
                        while self._pool.tasks:
                            await asyncio.gather(*self._pool.tasks, return_exceptions=True)
                for ds in self._datasets:
                    if not ds.state.finished:
                        if self._signals.stopping:
                            ds.state = DatasetState.STOPPED
                            ds.message = (
                                f"stopped at {counted(ds.tokens, 'token')}, "
                                f"{counted(ds.samples, 'sample')}"
                            )
                        else:
                            self._scheduler.settle(ds)
                if self._overtime is not None and (moved := self._overtime.tally()):
                    self._report.event("info", moved)
        finally:
            for task in (ticker, telemetry, planning, overtime, drains):
                if task is not None:
                    task.cancel()
            await self._feeder.stop()
            final = self.snapshot()
            self._close(final)
        if self._report.fatal is not None:
            raise EngineError(self._report.fatal)
        return final

    def _close(self, final: RunSnapshot) -> None:
        if self._opened:
            self._sink.write_progress(final)
            if self._on_snapshot is not None:
                self._on_snapshot(final)
        self._sink.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
