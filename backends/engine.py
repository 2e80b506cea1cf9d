"""The budget-aware generation engine: prompts in, one record per completed response out.

All selected datasets share one pool of `concurrency` slots. A free slot goes to the first
dataset, in priority (config) order, that has a tokenized prompt ready and whose budget
allows one more request, so the next dataset fills the slots the previous one leaves free
as it tapers toward its budget, and the server never idles between datasets.

Guarantees: a response is written (one `write()` of a whole line) before it counts; a
sample is sent at most once at a time and written at most once; failures never count;
cancellation can only interrupt a request before its response is complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import os
import random
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp

from gen_tui.backends import openai_api, sglang
from gen_tui.backends.aio import wait_event
from gen_tui.backends.budget import (
    Budget,
    BudgetMode,
    InFlight,
    LengthModel,
    eta_seconds,
    likely_end,
    may_dispatch,
    room_for_one,
    share_total,
)
from gen_tui.backends.lock import DatasetLock, LockHeld
from gen_tui.backends.prompts import Prompt, PromptProblem, iter_prompts
from gen_tui.backends.protocol import Generation, RequestFailed
from gen_tui.backends.records import (
    ERRORS_FILE,
    LOCK_FILE,
    PROGRESS_FILE,
    RAW_FILE,
    Completion,
    RecordFileError,
    RecordWriter,
    error_line,
    quarantine_torn_tail,
    scan_records,
    write_json_atomic,
)
from gen_tui.backends.run_config import (
    DatasetSpec,
    EngineConfig,
    EngineError,
    queued_concurrency,
    resolve_api_key,
)
from gen_tui.backends.snapshot import BudgetEvent, DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.backends.tokenizer import (
    TokenizerError,
    encode_many,
    encode_text,
    load_tokenizer,
)

RATE_WINDOW_S = 60.0
BACKOFF_CAP_S = 30.0
REFUSAL_STREAK = 20
"""Requests refused outright (4xx, not 429) in a row, with no success between, that end a run."""
MAX_OUTAGE_RETRIES = 240
"""Tries to reach an unreachable server before a sample is given up (about 2 h at the cap).

A server restart is waited out; a sample that always breaks the connection is not retried
forever."""


Event = Callable[[str, str], None]
FULL_NOTE_S = 60.0
"""A disk that fills again within this long of its last "full" notice gets a short one."""
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""Write errors that end when someone makes room: the run waits them out."""
_INT = frozenset({int})


def check_generation(generation: Generation) -> Generation:
    """Return `generation` if a record may be made of it, else raise a retryable RequestFailed.

    Why the engine checks what a client returns: a record is forever (training reads its
    ids), while a refused answer costs one retry. A server or proxy that sends ids of the
    wrong type, or a count that disagrees with them, must not end up on disk.
    """
    tokens = generation.completion_tokens
    ids = generation.output_ids
    problem = None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        problem = f"completion_tokens {tokens!r} is not a count"
    elif ids is not None and (not isinstance(ids, list) or len(ids) != tokens):
        problem = f"output_ids do not hold the {tokens} tokens it reports"
    elif ids is not None and not set(map(type, ids)) <= _INT:
        problem = "output_ids holds something other than integer token ids"
    elif (
        not isinstance(generation.finish_reason, str)
        or not isinstance(generation.prompt_tokens, int)
        or not (generation.text is None or isinstance(generation.text, str))
    ):
        problem = "finish_reason, prompt_tokens or text has the wrong type"
    if problem is not None:
        raise RequestFailed(f"malformed response: {problem}", retry=True)
    return generation


async def receive(call: Awaitable[Generation], url: str, secret: str | None = None) -> Generation:
    """Await one client call; anything it raises besides RequestFailed is a malformed answer.

    A client that chokes on an answer shape nobody foresaw would otherwise end the request
    task with a stray exception, and its sample would be dropped for the rest of the run
    without a line in errors.jsonl. Here it is a failed attempt like any other: retried,
    and given up on with its reason. The API key is kept out of the reason.
    """
    try:
        generation = await call
    except RequestFailed:
        raise
    except Exception as exc:
        reason = f"malformed response from {url}: {type(exc).__name__}: {exc}"
        if secret:
            reason = reason.replace(secret, "***")
        raise RequestFailed(reason, retry=True) from None
    return check_generation(generation)


def _held_message(held: int) -> str:
    return f"disk full: {held} answers held, waiting for room"


class _NoSpace(Exception):
    """A record could not be written for lack of space; nothing of it is in the file."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"cannot write {path}: {error.strerror or error}")


class _Server:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.outstanding = 0
        self.down_until = 0.0
        self.last_error = ""
        self.failures = 0
        """Connection failures in a row: a server that stays dead is tried less and less."""

    @property
    def status(self) -> str:
        if self.down_until > time.monotonic():
            return f"unreachable: {self.last_error}"
        return "ok"


class _Dataset:
    """Runtime state of one dataset in a run."""

    def __init__(self, spec: DatasetSpec, folder: Path, prior_mean: float) -> None:
        self.spec = spec
        self.folder = folder
        self.budget = Budget(spec.max_tokens, spec.max_samples)
        self.state = DatasetState.LOADING
        self.lock = DatasetLock(folder / LOCK_FILE)
        self.writer: RecordWriter | None = None
        self.errors_path = folder / ERRORS_FILE
        self.done: set[str] = set()
        self.tokens = 0
        self.samples = 0
        self.resumed_tokens = 0
        self.resumed_samples = 0
        self.model = LengthModel(prior_mean)
        self.inflight: list[InFlight] = []
        self.queue: asyncio.Queue[tuple[Prompt, list[int]]] | None = None
        self.producer_done = False
        self.errors = 0
        self.malformed = 0
        self.cost = 0.0
        self.priced = False
        self.recent: deque[tuple[float, int]] = deque()
        self.recent_tokens = 0
        """The sum of `recent`'s tokens, kept as it changes: snapshots come 4+ times a second."""
        self.started_at = time.time()
        self.first_record_mono: float | None = None
        self.last_record_at: float | None = None
        self.message = ""
        self.unwritten = 0
        self.held = 0
        """Complete answers kept in memory while the disk is full, written once it has room."""
        self.progress_failed = False
        self.errors_failed = False
        self.pinned = False
        """Its budget was set by the user mid-run: a total budget's split leaves it alone."""
        self.outlook_key: tuple[int, int] | None = None
        """(tokens, in flight) when its likely end was last handed on to the total's shares."""

    @property
    def all_sent(self) -> bool:
        """Every prompt has been sent: what is in flight is all it will still add."""
        return self.producer_done and self.queue is not None and self.queue.empty()

    @property
    def name(self) -> str:
        return self.spec.name

    def rates(self, now: float) -> tuple[float, float]:
        recent = self.recent
        while recent and now - recent[0][0] > RATE_WINDOW_S:
            self.recent_tokens -= recent.popleft()[1]
        if not recent or self.first_record_mono is None:
            return 0.0, 0.0
        span = min(RATE_WINDOW_S, max(now - self.first_record_mono, 1.0))
        return self.recent_tokens / span, len(recent) / span

    def note(self, now: float, tokens: int) -> None:
        """Count one record of `tokens` in the rate window."""
        self.recent.append((now, tokens))
        self.recent_tokens += tokens


class Engine:
    """Run the datasets of one :class:`EngineConfig` to their budgets.

    `on_snapshot` receives a :class:`RunSnapshot` every `snapshot_interval_s`; `on_event`
    receives (level, message) for things a person should read: resume summaries, skipped
    prompt lines, servers going away, budget crossings. `on_budget` receives the crossings
    and finishes again as :class:`BudgetEvent` data, for a UI to announce without parsing.
    """

    def __init__(
        self,
        config: EngineConfig,
        on_snapshot: Callable[[RunSnapshot], None] | None = None,
        on_event: Event | None = None,
        on_budget: Callable[[BudgetEvent], None] | None = None,
    ) -> None:
        if config.concurrency < 1:
            raise EngineError("concurrency must be at least 1")
        if not config.datasets:
            raise EngineError("no datasets selected")
        if not config.server_urls:
            raise EngineError("no server URL given")
        self.config = config
        self._on_snapshot = on_snapshot
        self._on_event = on_event
        self._on_budget = on_budget
        self._servers = [_Server(url) for url in config.server_urls]
        prior = float(config.max_new_tokens)
        self._datasets = [
            _Dataset(spec, config.output_dir / spec.name, prior) for spec in config.datasets
        ]
        self._wake = asyncio.Event()
        self._tasks: dict[asyncio.Task[None], str] = {}
        self._active_rids: dict[str, _Server] = {}
        self._stopping = False
        self._aborting = False
        self._paused = False
        self._started = time.monotonic()
        self._busy_slot_seconds = 0.0
        self._last_busy_mark = time.monotonic()
        self._first_dispatch: float | None = None
        self._last_idle: float | None = None
        self._tokenizer: Any = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gen-tui-tokenize")
        self._rng = random.Random(config.seed)
        self._host = socket.gethostname()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None
        self._opened = False
        self._producers: list[asyncio.Task[None]] = []
        self._limit = float(config.concurrency)
        self._last_cut = 0.0
        self._credits = asyncio.Event()
        self._credits.set()
        self._space = asyncio.Event()
        """Clear while the disk is full: dispatch waits, and the answers in hand retry."""
        self._space.set()
        self._full_said_at = -FULL_NOTE_S
        self._retry_now = asyncio.Event()
        """Set (then replaced) when one held answer got in, so the others try at once."""
        self._fatal: str | None = None
        self._refusals = 0
        self._api_key, self._key_hint = resolve_api_key(config)
        self.aborted = False

    # control: call on the engine's loop, or from another thread through `threadsafe`

    def request_stop(self) -> None:
        """First call: stop dispatching and drain. Second call: abort in-flight requests."""
        if self._stopping:
            self._aborting = True
        self._stopping = True
        self._credits.set()
        self._space.set()
        self._retry_now.set()  # answers waiting for room try once more, then give up
        self._wake.set()

    def set_paused(self, paused: bool) -> None:
        """Hold or release dispatch; in-flight requests carry on either way."""
        self._paused = paused
        for ds in self._datasets:
            if ds.state is DatasetState.ACTIVE and paused:
                ds.state = DatasetState.PAUSED
            elif ds.state is DatasetState.PAUSED and not paused:
                ds.state = DatasetState.ACTIVE
        self._wake.set()

    def set_budget(self, name: str, max_tokens: int | None, max_samples: int | None) -> None:
        """Change a dataset's budget mid-run; a dataset done at its old budget starts again."""
        for ds in self._datasets:
            if ds.name == name:
                ds.spec = DatasetSpec(
                    name, ds.spec.prompts, max_tokens, max_samples, ds.spec.weight
                )
                ds.pinned = max_tokens is not None
                self._apply_budget(ds, Budget(max_tokens, max_samples))
                self._rebalance()
                self._event(
                    "info", f"{name}: budget set to {max_tokens} tokens, {max_samples} samples"
                )
                return
        raise EngineError(f"unknown dataset {name!r}")

    def _apply_budget(self, ds: _Dataset, budget: Budget, *, share: bool = False) -> None:
        """Set a budget; a dataset done at its old one starts again if it now has room.

        For a new share of the total (`share`), room means room for one more answer: the
        shares move by small steps while a dataset's last answers arrive, and one woken
        for less than an answer would only overshoot. A budget the user sets is followed
        as given.
        """
        ds.budget = budget
        room = (
            room_for_one(
                self.config.budget_mode,
                budget,
                ds.tokens,
                ds.samples,
                ds.model,
                self.config.max_new_tokens,
            )
            if share
            else not budget.reached(ds.tokens, ds.samples)
        )
        if ds.state is DatasetState.DONE and room:
            if ds.queue is None:
                lookahead = self.config.lookahead or 2 * self.config.concurrency
                ds.queue = asyncio.Queue(maxsize=lookahead)
                self._producers.append(asyncio.create_task(self._produce(ds)))
            ds.state = DatasetState.WAITING
            ds.message = ""
        self._wake.set()

    def _rebalance(self) -> None:
        """Re-split `max_total_tokens` as datasets run out of prompts (and at start).

        A dataset out of prompts settles at its final count. One that has sent its last
        prompt but still has answers in flight settles, for now, at a high estimate of its
        end (`likely_end`), when that is below its share: the others get the rest at once
        and keep the slots full, instead of stopping at their first shares and leaving the
        pool to empty while its last answers run (for minutes on a real server). The
        exact count re-splits once it is in. A budget the user set mid-run (`set_budget`,
        the TUI's `r`) stays as set, and the others share what it leaves of the total.
        """
        total = self.config.max_total_tokens
        if total is None:
            return
        now = time.monotonic()
        settled: dict[str, int] = {}
        for ds in self._datasets:
            if ds.state is DatasetState.EXHAUSTED:
                settled[ds.name] = ds.tokens
            elif ds.pinned and ds.budget.max_tokens is not None:
                # What the user set holds; the others share the rest of the total.
                settled[ds.name] = ds.budget.max_tokens
            elif ds.all_sent and ds.inflight and not ds.state.finished:
                end = likely_end(ds.tokens, ds.inflight, ds.model, now)
                if ds.budget.max_tokens is not None and end < ds.budget.max_tokens:
                    settled[ds.name] = end
        shares = share_total(
            total,
            {ds.name: ds.spec.weight for ds in self._datasets},
            {ds.name: ds.spec.max_tokens for ds in self._datasets},
            settled,
        )
        for ds in self._datasets:
            if ds.name not in settled and ds.budget.max_tokens != shares[ds.name]:
                self._apply_budget(ds, Budget(shares[ds.name], ds.spec.max_samples), share=True)

    def _hand_on_early(self, ds: _Dataset) -> None:
        """Re-split the total whenever a dataset that has sent its last prompt gets an answer."""
        if self.config.max_total_tokens is None or not ds.all_sent or not ds.inflight:
            return
        key = (ds.tokens, len(ds.inflight))
        if key != ds.outlook_key:
            ds.outlook_key = key
            self._rebalance()

    def _hand_on(self, short: _Dataset) -> None:
        """Give the rest of an exhausted dataset's share to the others, and say so."""
        share = short.budget.max_tokens
        self._rebalance()
        if self.config.max_total_tokens is None or share is None or short.tokens >= share:
            return
        takers = [
            f"{ds.name} {ds.budget.max_tokens:,}"
            for ds in self._datasets
            if ds.state is not DatasetState.EXHAUSTED and ds.budget.max_tokens is not None
        ]
        self._event(
            "info",
            f"{short.name}: {share - short.tokens:,} tokens of its {share:,} share unused; "
            f"the total's shares are now {', '.join(takers) or 'none left to take it'}",
        )

    def threadsafe(self, method: Callable[..., None], *args: object) -> None:
        """Run a control method on the engine's loop from any thread (the TUI's, say)."""
        if self._loop is None:
            raise EngineError("the engine is not running")
        self._loop.call_soon_threadsafe(method, *args)

    # reporting

    def _event(self, level: str, message: str) -> None:
        if self._on_event is not None:
            self._on_event(level, message)

    def _budget_event(self, ds: _Dataset, kind: str) -> None:
        if self._on_budget is not None:
            self._on_budget(BudgetEvent(ds.name, kind, ds.tokens, ds.samples, ds.budget.max_tokens))

    def _mark_busy(self) -> None:
        now = time.monotonic()
        self._busy_slot_seconds += len(self._tasks) * (now - self._last_busy_mark)
        self._last_busy_mark = now
        self._last_idle = None if self._tasks else (self._last_idle or now)

    def active_seconds(self) -> float:
        """Wall time from the first dispatch to the last completion (or now)."""
        if self._first_dispatch is None:
            return 0.0
        return (self._last_idle or time.monotonic()) - self._first_dispatch

    def utilisation(self) -> float:
        """Busy slot-seconds over available slot-seconds, first dispatch to last completion."""
        span = self.active_seconds()
        if span <= 0:
            return 0.0
        return min(1.0, self._busy_slot_seconds / (span * self.config.concurrency))

    def snapshot(self) -> RunSnapshot:
        now_mono = time.monotonic()
        now = time.time()
        self._mark_busy()
        elapsed = max(now_mono - self._started, 1e-9)
        datasets = []
        for ds in self._datasets:
            tok_s, samples_s = ds.rates(now_mono)
            datasets.append(
                DatasetSnapshot(
                    name=ds.name,
                    state=ds.state,
                    tokens=ds.tokens,
                    samples=ds.samples,
                    max_tokens=ds.budget.max_tokens,
                    max_samples=ds.budget.max_samples,
                    budget_mode=str(self.config.budget_mode),
                    inflight=len(ds.inflight),
                    errors=ds.errors,
                    malformed=ds.malformed,
                    mean_tokens=ds.model.mean if ds.model.observed else None,
                    tok_s=tok_s,
                    samples_s=samples_s,
                    eta_s=None
                    if ds.state.finished
                    else eta_seconds(ds.budget, ds.tokens, ds.samples, tok_s, samples_s),
                    resumed_tokens=ds.resumed_tokens,
                    resumed_samples=ds.resumed_samples,
                    started_at=ds.started_at,
                    updated_at=now,
                    last_record_at=ds.last_record_at,
                    pid=os.getpid(),
                    host=self._host,
                    message=ds.message,
                    **self._cost_fields(ds, now_mono),
                )
            )
        return RunSnapshot(
            datasets=tuple(datasets),
            concurrency=self.config.concurrency,
            inflight=len(self._tasks),
            utilisation=self.utilisation(),
            active_s=self.active_seconds(),
            elapsed_s=elapsed,
            stopping=self._stopping,
            paused=self._paused,
            servers={server.url: server.status for server in self._servers},
            concurrency_limit=int(self._limit),
            max_total_tokens=self.config.max_total_tokens,
        )

    def _write_progress(self, snapshot: RunSnapshot) -> None:
        """Replace each progress.json; a failure is said once and never stops the run.

        progress.json is a view, not data: the records are what must not be lost, and a
        failed record write stops the run by itself (`_disk_failure`).
        """
        for ds, snap in zip(self._datasets, snapshot.datasets, strict=True):
            if ds.lock.held:
                payload = snap.to_json()
                payload["servers"] = snapshot.servers
                payload["pool"] = snapshot.pool_json()
                try:
                    write_json_atomic(ds.folder / PROGRESS_FILE, payload)
                except OSError as exc:
                    if not ds.progress_failed:
                        self._event(
                            "warning",
                            f"{ds.name}: cannot write {ds.folder / PROGRESS_FILE}: "
                            f"{exc.strerror or exc}",
                        )
                    ds.progress_failed = True
                else:
                    ds.progress_failed = False

    def _sync_writers(self) -> list[tuple[_Dataset, OSError]]:
        """fsync every record file (in a worker thread); return the failures for the loop."""
        failures = []
        for ds in self._datasets:
            writer = ds.writer
            if writer is not None:
                try:
                    writer.sync()
                except OSError as exc:
                    failures.append((ds, exc))
        return failures

    def _disk_failure(self, ds: _Dataset, path: Path, exc: OSError) -> None:
        """A record or error line could not be written (read-only, I/O error; not a full disk,
        which `_keep` waits out).

        Stop dispatching and drain, and end the run with one clear line: a run that went on
        would burn server time on answers it cannot keep. Nothing counts that is not on
        disk, and a half-written line has been cut off, so a later run resumes cleanly.
        """
        self._fail(
            f"{ds.name}: cannot write {path}: {exc.strerror or exc}; the records already "
            "written are intact: make it writable, then run the same command again to resume"
        )

    def _fail(self, reason: str) -> None:
        """End the run for `reason` (said once, the first one wins): stop dispatching, drain,
        and raise it as the run's EngineError."""
        if self._fatal is None:
            self._fatal = reason
            self._event("error", reason)
            self.request_stop()

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
                self._write_progress(snapshot)
                loop = asyncio.get_running_loop()
                for ds, exc in await loop.run_in_executor(None, self._sync_writers):
                    self._disk_failure(ds, ds.folder / RAW_FILE, exc)

    # setup

    async def _check_servers(self, session: aiohttp.ClientSession) -> None:
        probe = openai_api.check_reachable if self.config.api == "openai" else sglang.check_health
        problems = await asyncio.gather(*(probe(session, server.url) for server in self._servers))
        reachable = [p is None for p in problems]
        if not any(reachable):
            raise EngineError("no inference server reachable: " + "; ".join(filter(None, problems)))
        for server, problem in zip(self._servers, problems, strict=True):
            if problem is not None:
                server.last_error = problem
                server.down_until = time.monotonic() + 5
                self._event("warning", f"server {server.url} not answering yet: {problem}")
        if self.config.api == "sglang":
            await self._check_queue(session)

    async def _check_queue(self, session: aiohttp.ClientSession) -> None:
        """Say so when the pool cannot keep a queue at the servers.

        With no more requests than the servers run at once, each of their slots idles for a
        round trip (answer out, commit, next request in) after every answer: 1 to 3% of the
        capacity on loopback, more across a network. A few requests queued at the server
        hide it; the concurrency stays the user's choice.
        """
        batches = await asyncio.gather(
            *(sglang.running_batch(session, server.url) for server in self._servers)
        )
        if None in batches:
            return
        running = sum(b for b in batches if b is not None)
        if self.config.concurrency <= running:
            self._event(
                "info",
                f"--concurrency {self.config.concurrency} is not above the servers' running "
                f"batch (max_running_requests {running}): each slot will idle for a round trip "
                f"between answers; about {queued_concurrency(running)} keeps a queue at the "
                "server and the slots full",
            )

    def _open_dataset(self, ds: _Dataset) -> None:
        """Lock, scan and repair one dataset folder (runs in a worker thread)."""
        if not ds.spec.prompts.is_file():
            raise EngineError(f"{ds.name}: prompt file {ds.spec.prompts} does not exist")
        ds.folder.mkdir(parents=True, exist_ok=True)
        ds.lock.acquire()
        raw = ds.folder / RAW_FILE
        try:
            scan = scan_records(raw)
        except RecordFileError as exc:
            raise EngineError(
                f"{exc}; move the damaged line out of the file (or fix it) and start again"
            ) from None
        side = quarantine_torn_tail(raw, scan)
        if side is not None:
            self._event(
                "warning",
                f"{ds.name}: moved a torn last line ({side.stat().st_size} bytes, left by a crash) "
                f"from {raw} to {side}",
            )
        if scan.duplicates:
            self._event(
                "warning", f"{ds.name}: {raw} already holds {scan.duplicates} duplicate sample_ids"
            )
        ds.done = scan.done
        ds.tokens = ds.resumed_tokens = scan.tokens
        ds.samples = ds.resumed_samples = scan.records
        ds.model = LengthModel(float(self.config.max_new_tokens), scan.lengths)
        ds.writer = RecordWriter(raw)

    async def _open_all(self) -> None:
        loop = asyncio.get_running_loop()
        for ds in self._datasets:
            try:
                await loop.run_in_executor(self._pool, self._open_dataset, ds)
            except LockHeld as exc:
                raise EngineError(str(exc)) from None
            except OSError as exc:  # a read-only or full output folder, say
                where = exc.filename or ds.folder
                raise EngineError(
                    f"{ds.name}: cannot write in {where}: {exc.strerror or exc}"
                ) from None
        self._rebalance()
        for ds in self._datasets:
            if ds.samples:
                self._event(
                    "info",
                    f"{ds.name}: resuming with {ds.samples} records, {ds.tokens} tokens on disk",
                )
            if ds.budget.reached(ds.tokens, ds.samples):
                ds.state = DatasetState.DONE
                ds.message = "already at its budget: nothing to do"
                self._event(
                    "info",
                    f"{ds.name}: already at its budget ({ds.tokens} tokens, {ds.samples} samples); "
                    "nothing to do",
                )
            else:
                ds.state = DatasetState.WAITING
                ds.queue = asyncio.Queue(
                    maxsize=self.config.lookahead or 2 * self.config.concurrency
                )

    # tokenization, off the loop

    def _batch(self, path: Path, items: Iterator[Prompt | PromptProblem], size: int) -> list[Any]:
        """The next `size` prompts of `items`, tokenized in one call, and the problems met."""
        out: list[Any] = []
        prompts: list[Prompt] = []
        for item in items:
            if isinstance(item, PromptProblem):
                out.append(item)
                continue
            prompts.append(item)
            if len(prompts) >= size:
                break
        if self.config.api == "openai":
            return out + [(prompt, None) for prompt in prompts]
        encoded = encode_many(self._tokenizer, [prompt.messages for prompt in prompts])
        for prompt, ids in zip(prompts, encoded, strict=True):
            if isinstance(ids, Exception):
                out.append(PromptProblem(path, prompt.line, f"cannot tokenize: {ids}"))
            else:
                out.append((prompt, ids))
        return out

    async def _produce(self, ds: _Dataset) -> None:
        assert ds.queue is not None
        loop = asyncio.get_running_loop()
        items = iter_prompts(ds.spec.prompts, skip=ds.done)
        size = 32
        try:
            while not self._stopping:
                batch = await loop.run_in_executor(
                    self._pool, self._batch, ds.spec.prompts, items, size
                )
                if not batch:
                    break
                for item in batch:
                    if isinstance(item, PromptProblem):
                        ds.malformed += 1
                        self._event("warning", f"{ds.name}: skipped {item}")
                        continue
                    await ds.queue.put(item)
                    self._wake.set()
        except OSError as exc:
            ds.message = f"cannot read prompts: {exc}"
            self._event("error", f"{ds.name}: {ds.message}")
        finally:
            ds.producer_done = True
            self._wake.set()

    # dispatch

    def _any_server_up(self) -> bool:
        now = time.monotonic()
        return any(s.down_until <= now for s in self._servers)

    def _pick_server(self) -> _Server:
        now = time.monotonic()
        up = [s for s in self._servers if s.down_until <= now]
        if up:
            return min(up, key=lambda s: s.outstanding)
        return min(self._servers, key=lambda s: s.down_until)

    def _settle(self, ds: _Dataset) -> None:
        """Move a dataset that can make no more progress to its final state."""
        if ds.state.finished or ds.inflight:
            return
        if ds.budget.reached(ds.tokens, ds.samples):
            ds.state = DatasetState.DONE
            ds.message = f"budget reached: {ds.tokens} tokens, {ds.samples} samples"
        elif ds.all_sent:  # before "no room": what it leaves of a share goes to the others
            ds.state = DatasetState.EXHAUSTED
            ds.message = f"all prompts done: {ds.tokens} tokens, {ds.samples} samples"
            self._event("budget", f"{ds.name}: {ds.message}")
            self._budget_event(ds, "exhausted")
            self._hand_on(ds)
            return
        elif not may_dispatch(
            self.config.budget_mode,
            ds.budget,
            ds.tokens,
            ds.samples,
            [],
            ds.model,
            self.config.max_new_tokens,
        ):
            ds.state = DatasetState.DONE
            ds.message = f"budget reached: {ds.tokens} tokens (strict: no room for one more)"
        else:
            return
        self._event("budget", f"{ds.name}: {ds.message}")
        self._budget_event(ds, "done")
        if ds.outlook_key is not None:
            # Its end was handed on as an estimate; done at its share, it keeps all of it.
            self._rebalance()

    def _candidates(self) -> list[_Dataset]:
        """Datasets in the order a free slot is offered to them.

        The first `parallel_datasets` unfinished ones share the pool, the least served
        first; every later one only gets slots those cannot use, in priority order.
        """
        live = [ds for ds in self._datasets if not ds.state.finished]
        front = self.config.parallel_datasets
        if front <= 1:
            return live
        return sorted(live[:front], key=lambda ds: len(ds.inflight)) + live[front:]

    def _pick(self) -> _Dataset | None:
        candidates = self._candidates()
        for ds in candidates:  # all of them, not only those before the pick: a dataset
            self._settle(ds)  # behind a busy one still finishes (and hands on) on time
            self._hand_on_early(ds)
        for ds in candidates:
            if ds.state.finished or ds.queue is None or ds.queue.empty():
                continue
            if may_dispatch(
                self.config.budget_mode,
                ds.budget,
                ds.tokens,
                ds.samples,
                ds.inflight,
                ds.model,
                self.config.max_new_tokens,
            ):
                return ds
        return None

    async def _dispatch(self) -> None:
        while True:
            # Cleared before looking, not before waiting: a wake raised while looking (a
            # dataset running out of prompts hands its share to ones already done) must
            # end the wait below, or the run waits forever with nothing in flight.
            self._wake.clear()
            self._mark_busy()
            if self._stopping:
                return
            if all(ds.state.finished for ds in self._datasets):
                return
            if not self._tasks and self._cost_exhausted():
                self._finish_on_cost()
                return
            if (
                not self._paused
                and self._credits.is_set()
                and self._space.is_set()
                and len(self._tasks) < int(self._limit)
                and not self._cost_exhausted()
            ):
                ds = self._pick()
                if ds is not None:
                    assert ds.queue is not None
                    prompt, ids = ds.queue.get_nowait()
                    ds.state = DatasetState.ACTIVE
                    if self._first_dispatch is None:
                        self._first_dispatch = self._last_busy_mark = time.monotonic()
                    entry = InFlight(time.monotonic(), self.config.max_new_tokens)
                    ds.inflight.append(entry)
                    task = asyncio.create_task(self._request(ds, entry, prompt, ids))
                    self._tasks[task] = ds.name
                    task.add_done_callback(self._task_done)
                    continue
                if all(ds.state.finished for ds in self._datasets):
                    return
            await self._wake.wait()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._mark_busy()
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            self._event("error", f"internal error in a request: {task.exception()!r}")
        self._wake.set()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, 300.0) + self._rng.uniform(0, 0.1)
        return min(BACKOFF_CAP_S, 0.25 * 2**attempt) * self._rng.uniform(0.5, 1.5)

    async def _request(
        self, ds: _Dataset, entry: InFlight, prompt: Prompt, input_ids: list[int]
    ) -> None:
        """Send one sample until it completes, fails for good, or the run stops.

        `entry` was registered by the dispatcher before this task first ran, so the budget
        sees it at once; it is removed here whatever happens.
        """
        attempts = 0
        outages = 0
        assert self._session is not None
        try:
            while True:
                server = self._pick_server()
                entry.started = time.monotonic()
                rid = f"{ds.name}/{prompt.sample_id}/{uuid.uuid4().hex[:12]}"
                server.outstanding += 1
                self._active_rids[rid] = server
                try:
                    generation = await self._send(server, ds, prompt, input_ids, rid)
                except RequestFailed as exc:
                    self._react(exc)
                    if exc.kind == RequestFailed.PAYMENT:
                        await self._credits.wait()
                        if self._stopping:
                            return
                        continue
                    if exc.counts:
                        attempts += 1
                        outages = 0
                    else:
                        outages += 1
                        server.failures += 1
                        server.last_error = exc.reason
                        server.down_until = time.monotonic() + self._backoff(server.failures, None)
                        if outages in (1, 10) or outages % 100 == 0:
                            self._event("warning", f"{ds.name}: {exc.reason} (retrying)")
                    if (
                        not exc.retry
                        or attempts > self.config.max_retries
                        or outages > MAX_OUTAGE_RETRIES
                    ):
                        self._give_up(ds, prompt, exc, attempts)
                        return
                    if self._stopping:
                        return
                    if not exc.counts and self._any_server_up():
                        continue  # this server is away, another is up: go there now
                    await asyncio.sleep(self._backoff(attempts + outages, exc.retry_after))
                    if self._stopping:
                        return
                    continue
                finally:
                    server.outstanding -= 1
                    self._active_rids.pop(rid, None)
                server.down_until = 0.0
                server.failures = 0
                self._grow_limit()
                if generation.output_ids is None and self._tokenizer is not None:
                    generation = await self._attach_ids(generation)
                await self._keep(ds, prompt, generation, server.url)
                return
        finally:
            ds.inflight.remove(entry)

    async def _keep(self, ds: _Dataset, prompt: Prompt, gen: Generation, server: str) -> None:
        """Commit a complete answer, holding it through a full disk until there is room.

        A full disk is the one write failure that ends by itself, when someone deletes a
        checkpoint or a log. The answer in hand cost GPU time: it stays in memory, is tried
        again every `disk_probe_s`, and dispatch waits meanwhile. A stop gives it one last
        try, then it is counted unwritten (it is generated again on resume).
        """
        while True:
            try:
                self._commit(ds, prompt, gen, server)
            except _NoSpace as exc:
                if self._stopping:
                    ds.unwritten += 1
                    return
                await self._wait_for_space(ds, exc)
                continue
            if not self._space.is_set():
                if any(other.held for other in self._datasets):
                    self._retry_now.set()  # room for one may be room for all: try them now
                    self._retry_now = asyncio.Event()
                else:  # every held answer is in: the disk has room again
                    self._space.set()
                    self._event("info", f"{ds.name}: the disk has room again: dispatch resumed")
            return

    async def _wait_for_space(self, ds: _Dataset, exc: _NoSpace) -> None:
        if self._space.is_set():
            self._space.clear()
            now = time.monotonic()
            if now - self._full_said_at < FULL_NOTE_S:
                # A disk at the edge lets a few answers in and fills again: say it shortly.
                self._event("warning", f"{ds.name}: the disk is full again: dispatch paused")
            else:
                self._event(
                    "error",
                    f"{ds.name}: {exc}; dispatch paused. Answers already generated are held in "
                    "memory and written as soon as there is room (tried every "
                    f"{self.config.disk_probe_s:g} s): make room, or stop the run and resume "
                    "it later",
                )
            self._full_said_at = now
        ds.held += 1
        ds.message = _held_message(ds.held)
        try:
            await wait_event(self._retry_now, self.config.disk_probe_s)
        finally:
            ds.held -= 1
            if ds.message.startswith("disk full"):
                ds.message = _held_message(ds.held) if ds.held else ""

    async def _send(
        self, server: _Server, ds: _Dataset, prompt: Prompt, input_ids: list[int] | None, rid: str
    ) -> Generation:
        assert self._session is not None
        if self.config.api == "openai":
            call = openai_api.chat(
                self._session,
                server.url,
                messages=prompt.messages,
                sampling=self.config.sampling,
                model=self.config.model,
                api_key=self._api_key,
                key_hint=self._key_hint,
                dataset=ds.name,
                stream=self.config.stream,
                timeout_s=self.config.request_timeout_s,
            )
        else:
            assert input_ids is not None
            call = sglang.generate(
                self._session,
                server.url,
                input_ids,
                self.config.sampling,
                rid,
                stream=self.config.stream,
                timeout_s=self.config.request_timeout_s,
            )
        return await receive(call, server.url, self._api_key)

    async def _attach_ids(self, generation: Generation) -> Generation:
        """Training needs the target model's ids; an API gives text, so tokenize it here."""
        loop = asyncio.get_running_loop()
        ids = await loop.run_in_executor(
            self._pool, encode_text, self._tokenizer, generation.text or ""
        )
        return dataclasses.replace(generation, output_ids=ids)

    def _react(self, exc: RequestFailed) -> None:
        """Run-wide reactions: slow down on 429s, pause on 402, stop on a refused key."""
        now = time.monotonic()
        if exc.kind == RequestFailed.RATE and now - self._last_cut > 1.0:
            self._last_cut = now
            self._limit = max(1.0, self._limit / 2)
            self._event("warning", f"rate limited: concurrency cut to {int(self._limit)}")
        elif exc.kind == RequestFailed.PAYMENT and self._credits.is_set():
            self._credits.clear()
            probe = self.config.credit_probe_s
            self._event(
                "error", f"{exc.reason}: dispatch paused; add credits (retrying every {probe:g} s)"
            )
            asyncio.get_running_loop().call_later(probe, self._credits.set)
        elif exc.kind == RequestFailed.AUTH:
            self._fail(exc.reason)

    def total_cost(self) -> float:
        return sum(ds.cost for ds in self._datasets)

    def _cost_exhausted(self) -> bool:
        """Whether `max_cost` leaves no room for one more request at the current mean cost."""
        limit = self.config.max_cost
        if limit is None:
            return False
        spent = self.total_cost()
        done = sum(ds.samples - ds.resumed_samples for ds in self._datasets)
        per_request = spent / done if done else 0.0
        return spent + (len(self._tasks) + 1) * per_request >= limit

    def _cost_fields(self, ds: _Dataset, now: float) -> dict[str, float | None]:
        """Spent, $/hour over the run so far, and the projected cost at the token budget."""
        if not ds.priced:
            return {}
        hours = (now - ds.first_record_mono) / 3600 if ds.first_record_mono else 0.0
        new_tokens = ds.tokens - ds.resumed_tokens
        projected = None
        if ds.budget.max_tokens is not None and new_tokens > 0:
            remaining = max(0, ds.budget.max_tokens - ds.tokens)
            projected = ds.cost + remaining * ds.cost / new_tokens
        return {
            "cost": ds.cost,
            "cost_per_hour": ds.cost / hours if hours > 0 else None,
            "projected_cost": projected,
        }

    def _finish_on_cost(self) -> None:
        spent = self.total_cost()
        for ds in self._datasets:
            if not ds.state.finished:
                ds.state = DatasetState.DONE
                ds.message = f"cost budget reached: ${spent:.2f} of ${self.config.max_cost:g}"
        self._event("budget", f"cost budget reached: ${spent:.2f} spent")

    def _price(self, gen: Generation) -> float | None:
        if gen.cost is not None:
            return gen.cost
        if self.config.price_per_million is None:
            return None
        per_in, per_out = self.config.price_per_million
        return (gen.prompt_tokens * per_in + gen.completion_tokens * per_out) / 1e6

    def _grow_limit(self) -> None:
        """Additive increase: about one more slot per `limit` successes, up to the cap."""
        if self._limit < self.config.concurrency:
            self._limit = min(float(self.config.concurrency), self._limit + 1.0 / self._limit)

    def _give_up(self, ds: _Dataset, prompt: Prompt, exc: RequestFailed, attempts: int) -> None:
        ds.errors += 1
        refused = not exc.retry and exc.status is not None and 400 <= exc.status < 500
        self._refusals = self._refusals + 1 if refused else 0
        if self._refusals >= REFUSAL_STREAK:
            # A wrong --model or sampling option is refused for every prompt alike: stop
            # instead of writing the whole dataset into errors.jsonl one 400 at a time.
            self._fail(
                f"the server refused {self._refusals} requests in a row ({exc.reason}); "
                "check --model, the sampling options and the server URL. The refused samples "
                "are listed in errors.jsonl and are sent again on the next run"
            )
        try:
            with open(ds.errors_path, "ab") as handle:
                handle.write(error_line(prompt.sample_id, exc.reason, attempts, exc.status))
        except OSError as error:
            if error.errno not in NO_SPACE:
                self._disk_failure(ds, ds.errors_path, error)
            elif not ds.errors_failed:  # the sample is not done either way: sent next run
                self._event(
                    "warning",
                    f"{ds.name}: cannot note failed samples in {ds.errors_path}: "
                    f"{error.strerror}; they are sent again on the next run all the same",
                )
            ds.errors_failed = True
        if ds.errors <= 5 or ds.errors % 100 == 0:
            self._event("warning", f"{ds.name}: sample {prompt.sample_id!r} failed: {exc.reason}")

    def _commit(self, ds: _Dataset, prompt: Prompt, gen: Generation, server: str) -> None:
        key = prompt.key
        if key in ds.done:
            return
        if (
            self.config.budget_mode is BudgetMode.STRICT
            and ds.budget.max_tokens is not None
            and ds.tokens + gen.completion_tokens > ds.budget.max_tokens
        ):
            self._event(
                "warning",
                f"{ds.name}: dropped a {gen.completion_tokens}-token response that would pass "
                "the strict budget (the server exceeded max_new_tokens)",
            )
            return
        assert ds.writer is not None
        self._refusals = 0
        cost = self._price(gen)
        line = Completion(
            sample_id=prompt.sample_id,
            completion_tokens=gen.completion_tokens,
            prompt_tokens=gen.prompt_tokens,
            finish_reason=gen.finish_reason,
            output_ids=gen.output_ids,
            text=gen.text,
            latency_s=gen.latency_s,
            server=server,
            cost=cost,
        ).to_line()
        try:
            ds.writer.write(line)
        except OSError as exc:
            if exc.errno in NO_SPACE:
                raise _NoSpace(ds.writer.path, exc) from None
            ds.unwritten += 1  # not done: sent again on resume
            self._disk_failure(ds, ds.writer.path, exc)
            return
        if cost is not None:
            ds.cost += cost
            ds.priced = True
        ds.done.add(key)
        was_reached = ds.budget.reached(ds.tokens, ds.samples)
        ds.tokens += gen.completion_tokens
        ds.samples += 1
        ds.model.observe(gen.completion_tokens, gen.latency_s)
        now = time.monotonic()
        if ds.first_record_mono is None:
            ds.first_record_mono = now
        ds.note(now, gen.completion_tokens)
        ds.last_record_at = time.time()
        if not was_reached and ds.budget.reached(ds.tokens, ds.samples):
            self._event("info", f"{ds.name}: crossed its budget at {ds.tokens} tokens")
            self._budget_event(ds, "crossed")

    # shutdown

    async def _drain(self) -> None:
        deadline = time.monotonic() + self.config.grace_s
        for ds in self._datasets:
            if not ds.state.finished and ds.inflight:
                ds.state = DatasetState.DRAINING
        if self._tasks:
            self._event(
                "info",
                f"stopping: draining {len(self._tasks)} in-flight requests "
                f"(up to {self.config.grace_s:g} s; signal again to abort them)",
            )
        while self._tasks and not self._aborting:
            self._wake.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._event("warning", "drain grace period over: aborting in-flight requests")
                break
            await wait_event(self._wake, min(remaining, 0.5))
        if self._tasks:
            await self._abort_inflight()

    async def _abort_inflight(self) -> None:
        self.aborted = True
        count = len(self._tasks)
        assert self._session is not None
        rids = list(self._active_rids.items())
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(
            *(sglang.abort(self._session, server.url, rid) for rid, server in rids),
            return_exceptions=True,
        )
        self._event("warning", f"aborted {count} in-flight requests (their samples stay undone)")

    async def run(self) -> RunSnapshot:
        """Run to completion (or until stopped); returns the final snapshot."""
        self._loop = asyncio.get_running_loop()
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
        ticker: asyncio.Task[None] | None = None
        try:
            async with aiohttp.ClientSession(connector=connector) as session:
                self._session = session
                await self._check_servers(session)
                if self.config.tokenizer:
                    try:
                        self._tokenizer = await self._loop.run_in_executor(
                            self._pool, load_tokenizer, self.config.tokenizer
                        )
                    except TokenizerError as exc:
                        raise EngineError(str(exc)) from None
                elif self.config.api == "sglang":
                    raise EngineError("SGLang's /generate needs input ids: give --tokenizer DIR")
                await self._open_all()
                self._opened = True
                ticker = asyncio.create_task(self._ticker())
                self._producers = [
                    asyncio.create_task(self._produce(ds))
                    for ds in self._datasets
                    if not ds.state.finished
                ]
                await self._dispatch()
                if self._stopping:
                    await self._drain()
                else:
                    while self._tasks:
                        await asyncio.gather(*self._tasks, return_exceptions=True)
                for ds in self._datasets:
                    if not ds.state.finished:
                        if self._stopping:
                            ds.state = DatasetState.STOPPED
                            ds.message = f"stopped at {ds.tokens} tokens, {ds.samples} samples"
                        else:
                            self._settle(ds)
        finally:
            if ticker is not None:
                ticker.cancel()
            for producer in self._producers:
                producer.cancel()
            await asyncio.gather(*self._producers, return_exceptions=True)
            final = self.snapshot()
            self._close(final)
        if self._fatal is not None:
            raise EngineError(self._fatal)
        return final

    def _close(self, final: RunSnapshot) -> None:
        if self._opened:
            self._write_progress(final)
            if self._on_snapshot is not None:
                self._on_snapshot(final)
        for ds in self._datasets:
            if ds.unwritten:
                self._event(
                    "warning",
                    f"{ds.name}: {ds.unwritten} completed responses could not be written; "
                    "they are generated again on resume",
                )
            if ds.writer is not None:
                with contextlib.suppress(OSError):  # fsync on a failing disk: said already
                    ds.writer.close()
                ds.writer = None
            ds.lock.release()
        self._pool.shutdown(wait=False, cancel_futures=True)
