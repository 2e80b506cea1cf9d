"""One dataset in a run: its budget, its tally, its queue of tokenized prompts, its state.

Plain data with a little arithmetic: the scheduler, the allocator and the sink all read
and move the same tally, so it lives in one object none of them owns.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from pathlib import Path

from gen_tui.backends.budget.expected import ExpectedLengths
from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import Budget, BudgetMode, length_model
from gen_tui.backends.config.run import DatasetSpec
from gen_tui.backends.progress.batches import BatchView
from gen_tui.backends.progress.quality import QualityWatch
from gen_tui.backends.progress.rate import RateMeter
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.progress.truncation import TruncationWatch
from gen_tui.backends.store.conversations import TurnOnDisk
from gen_tui.backends.store.lock import DatasetLock
from gen_tui.backends.store.prompts import Prompt
from gen_tui.backends.store.records import ERRORS_FILE, LOCK_FILE, RecordWriter

RATE_WINDOW_S = 60.0
"""The window a dataset's tokens/s and samples/s are measured over (stretched to hold
`rate.MIN_STEPS` records, as the watched panels' 30 s one is)."""

Queued = tuple[Prompt, list[int] | None]
"""A prompt ready to send, with its token ids (None for a client that takes messages)."""


class DatasetRun:
    """Runtime state of one dataset in a run."""

    def __init__(
        self,
        spec: DatasetSpec,
        folder: Path,
        cap: float,
        mode: BudgetMode = BudgetMode.PREDICTIVE,
        per_conversation: bool = False,
    ) -> None:
        self.spec = spec
        self.per_conversation = per_conversation
        """`--turns all`: `--max-samples` counts conversations (`budget_samples`), not turns."""
        self.folder = folder
        self.budget = Budget(spec.max_tokens, spec.max_samples)
        self.state = DatasetState.LOADING
        self.on_hold = False
        """Paused alone (`Pause(dataset=...)`): the scheduler offers it no slot."""
        self.halted = False
        """Stopped alone (`Stop(dataset=...)`): no slot again; it ends once drained."""
        self.lock = DatasetLock(folder / LOCK_FILE)
        self.writer: RecordWriter | None = None
        self.errors_path = folder / ERRORS_FILE
        self.done: set[str] = set()
        self.held_out: set[str] = set()
        """Samples in a batch still open at the provider when the run began (the batch
        lane's journal, as read then): the feed passes over them, their answers come from
        that batch, or the batch lane gives them back (`given_back`) if none does."""
        self.history: dict[str, dict[int, TurnOnDisk]] = {}
        """With `--turns all`, on a resume: the turns on disk of each conversation begun and
        not finished, its next turn's history (taken out as the conversation resumes)."""
        self.tokens = 0
        self.samples = 0
        self.resumed_tokens = 0
        self.resumed_samples = 0
        self.model = length_model(mode, int(cap))  # answers up to `cap`; replaced on open
        self.expected = ExpectedLengths(int(cap))
        """What its answers in flight are expected to add, every mode's bound; replaced on open."""
        self.budget_note = ""
        """Said once when its budget is too small for the pool (the panel, progress.json)."""
        self.budget_noted = False
        """Whether the scheduler said its note (never twice; withdrawn from the panel
        once the budget lets it fill the pool after all)."""
        self.inflight: list[InFlight] = []
        self.queue: asyncio.Queue[Queued] | None = None
        self.batches: tuple[BatchView, ...] = ()
        """Its batches in flight as last polled (the batch lane's; the panel's view)."""
        self.cost_saved: float | None = None
        """Its batch answers' cost at the live price less their cost (None: unknown)."""
        self.lane_tokens: dict[str, int] = {}
        """Its tokens of this run per fleet lane (the panel's lane split; empty: no lanes)."""
        self.given_back: deque[Queued] = deque()
        """Prompts a batch did not answer (expired, cancelled, failed), sent again before
        the queue's: the batch lane's, empty on the live path."""
        self.producer_done = False
        self.errors = 0
        self.malformed = 0
        self.cost = 0.0
        self.priced = False
        self.run_tokens = 0
        self.run_samples = 0
        """Its tokens and records written by this run (not those resumed from): `rate`'s totals."""
        self.rate = RateMeter(RATE_WINDOW_S, stops=True)
        self.rate.add(time.monotonic(), 0, 0)  # from here: a first record has a rate
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
        self.truncation = TruncationWatch()
        self.quality = QualityWatch()
        self.begun_queued = 0
        """With `--turns all`, on a resume: conversations begun on disk that are queued and
        not sent yet. The feeder queues them first and the scheduler sends them whatever
        the budget: a conversation once begun is finished."""
        self.begun_read = True
        """False while a resumed `--turns all` feed has not queued all the conversations
        begun on disk yet (the dataset does not settle meanwhile)."""
        self.conversations_done = 0
        """With `--turns all`: conversations whose every turn is on disk."""
        self.conversations_fed = 0
        self.turns_fed = 0
        """With `--turns all`: conversations queued and their turns, for the mean a
        conversation not begun yet is planned at (`turns_mean`)."""
        self.turns_max = 1
        """With `--turns all`: the most turns of a conversation queued so far, what the strict
        budget reserves for the next one (whichever it is, it has no more)."""
        self.prompt_lines: int | None = None
        """Non-empty lines of its prompt file, once counted (the feeder counts them)."""

    @property
    def prompts_left(self) -> int | None:
        """Answers its prompt file can still give (None: not counted yet): exact once every
        prompt is read, else the file's lines less those done, skipped and given up."""
        if self.conversations_fed:  # --turns all: an answer is a turn
            return self._turns_left()
        if self.producer_done and self.queue is not None:
            return self.queue.qsize() + len(self.given_back) + len(self.inflight)
        if self.prompt_lines is None:
            return None
        return max(0, self.prompt_lines - len(self.done) - self.malformed - self.errors)

    def _turns_left(self) -> int | None:
        """`prompts_left` with `--turns all`: the turns in flight conversations still
        send, and the conversations not begun at the mean turn count so far."""
        begun = sum(1 + entry.turns_left for entry in self.inflight)
        if self.producer_done and self.queue is not None:
            waiting: int | None = self.queue.qsize()
        elif self.prompt_lines is None:
            return None
        else:
            gone = self.conversations_done + len(self.inflight) + self.malformed + self.errors
            waiting = max(0, self.prompt_lines - gone)
        return begun + round((waiting or 0) * self.turns_mean)

    @property
    def turns_mean(self) -> float:
        """The mean turns of the conversations queued so far (1 with `--turns last`): what
        the scheduler plans the next conversation at."""
        return self.turns_fed / self.conversations_fed if self.conversations_fed else 1.0

    @property
    def all_sent(self) -> bool:
        """Every prompt has been sent: what is in flight is all it will still add."""
        return (
            self.producer_done
            and self.queue is not None
            and self.queue.empty()
            and not self.given_back
        )

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def budget_samples(self) -> int:
        """What `--max-samples` counts: records, or with `--turns all` whole conversations
        (a conversation in flight is one request in the budget's eyes, its turns one
        sample: a limit of N gives N whole conversations, never N turns cut mid-way)."""
        return self.conversations_done if self.per_conversation else self.samples

    @property
    def reached(self) -> bool:
        """Whether its committed tally is at its budget."""
        return self.budget.reached(self.tokens, self.budget_samples)

    def rates(self, now: float) -> tuple[float, float]:
        """(tokens/s, samples/s) of its records at `now` (`RateMeter`'s rule, over
        RATE_WINDOW_S): steady for one record a minute, 0 once it stalls."""
        return self.rate.rates(now)

    def record(self, key: str, tokens: int, latency_s: float | None) -> None:
        """Count one written record of `tokens` in the tally, the length model and the rates."""
        self.done.add(key)
        self.tokens += tokens
        self.samples += 1
        self.model.observe(tokens, latency_s)
        self.expected.observe(tokens)
        now = time.monotonic()
        if self.first_record_mono is None:
            self.first_record_mono = now
        self.run_tokens += tokens
        self.run_samples += 1
        self.rate.add(now, self.run_tokens, self.run_samples)
        self.last_record_at = time.time()
