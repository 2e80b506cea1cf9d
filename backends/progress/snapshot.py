"""Progress snapshots: the one shape in which the engine reports itself.

The engine publishes a :class:`RunSnapshot` a few times a second (never one message per
response); the headless display, `progress.json` and the TUI all read the same fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from gen_tui.backends.progress.batches import BatchView
from gen_tui.backends.progress.plan_view import PlanView
from gen_tui.backends.progress.quality import Quality
from gen_tui.backends.settings import DEFAULT_TRUNCATED_WARN
from gen_tui.backends.telemetry.gpus import Gpu
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.backends.telemetry.workers import WorkerLoad

PROGRESS_VERSION = 2
"""progress.json's shape: 2 made `servers` map a URL to `{"state", "metrics"}` (1: to the
state alone); readers take both. A router's entry may also carry `workers`, a list of
`{"url", "healthy", "state", "metrics"}` (its `metrics` then being their sum): a key
added, which readers of 2 without it skip. So are a dataset's `batches` (its batches in
flight, see batches.py) and `cost_saved`, added by the batch lane, and the fleet's `plan`
(plan_view.py) and the dataset's `lanes` (its tokens per lane), added by the planner."""


class DatasetState(StrEnum):
    LOADING = "loading"
    WAITING = "waiting"
    ACTIVE = "active"
    PAUSED = "paused"
    DRAINING = "draining"
    DONE = "done"
    EXHAUSTED = "exhausted"
    STOPPED = "stopped"
    FAILED = "failed"
    NOT_STARTED = "not started"
    """A watched dataset no run has touched yet (no records, lock or progress.json): said as
    such, since "stopped" reads as if something was killed. Never written by the engine."""

    @property
    def finished(self) -> bool:
        """Nothing writes it and nothing will until someone starts it (ended, or never begun):
        no rate, no ETA, no staleness."""
        return self in _FINISHED


_FINISHED = frozenset(
    {
        DatasetState.DONE,
        DatasetState.EXHAUSTED,
        DatasetState.STOPPED,
        DatasetState.FAILED,
        DatasetState.NOT_STARTED,
    }
)
"""Built once: the scheduler asks `finished` of every dataset at every launch."""


def producing_rates(
    state: DatasetState, inflight: int, rates: tuple[float, float]
) -> tuple[float, float]:
    """(tok/s, samples/s) as said everywhere (panel, header, `h`, progress.json, the
    headless table, the report): 0 for a dataset that produces nothing, finished, or paused
    with nothing left in flight. A trailing window's rate decays for a minute after the
    last record; shown, it read as if the dataset were still writing (issue 31 point 6)."""
    if state.finished or (state is DatasetState.PAUSED and inflight <= 0):
        return 0.0, 0.0
    return rates


def run_rate(snap: DatasetSnapshot) -> float:
    """The tok/s of `snap`'s own run over its life (its tokens, not those it resumed from,
    from its start to its last record); 0 when it has none. A stopped dataset's rate is 0
    (`producing_rates`), yet the `r` preview needs what it did to estimate a new budget's
    time: "no rate yet" for a dataset that had just run at 52k tok/s (issue 31, point 19)."""
    produced = snap.tokens - snap.resumed_tokens
    if produced <= 0 or not snap.started_at or snap.last_record_at is None:
        return 0.0
    span = snap.last_record_at - snap.started_at
    return produced / span if span > 0 else 0.0


def whole_rate(run: RunSnapshot) -> float:
    """The server's tok/s in `run`: every dataset's own tokens (not those resumed from) over
    the time requests were in flight; 0 when it has none. One dataset's rate is its share
    beside the others; alone it gets about this (issue 31: B2 made 56.8k tok/s beside seven
    others, then its next 5M in 8 s alone)."""
    produced = sum(d.tokens - d.resumed_tokens for d in run.datasets)
    return produced / run.active_s if produced > 0 and run.active_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class DatasetSnapshot:
    name: str
    state: DatasetState
    tokens: int
    samples: int
    max_tokens: int | None
    max_samples: int | None
    budget_mode: str
    inflight: int
    errors: int
    malformed: int
    mean_tokens: float | None
    tok_s: float
    samples_s: float
    eta_s: float | None
    resumed_tokens: int
    resumed_samples: int
    started_at: float
    updated_at: float
    last_record_at: float | None
    pid: int
    host: str
    message: str = ""
    cost: float | None = None
    cost_per_hour: float | None = None
    projected_cost: float | None = None
    truncated: int = 0
    """Answers cut at max_new_tokens (finish_reason "length") among `truncated_of`."""
    truncated_of: int = 0
    """The answers that count covers: every record of the dataset's file (those a resumed
    run found in it as well as its own), as the watcher counts a foreign script's."""
    truncated_warn: float = DEFAULT_TRUNCATED_WARN
    """The percent past which the writer warns about the share (its --warn-truncated)."""
    quality: Quality | None = None
    """Finish reasons, lengths, latency and errors of this run's answers (None: unknown,
    e.g. a writer that is not gen-tui)."""
    prompts_left: int | None = None
    """Prompts of its file not yet answered (None: unknown): with the mean length, whether
    the file runs out before the budget."""
    budget_note: str = ""
    """Said once a budget is too small for the pool: "4,000 tokens is about 31 answers; 31
    of 128 slots used" (empty: it is not)."""
    batches: tuple[BatchView, ...] = ()
    """Its batches in flight (`--api openai-batch`), as the provider last said them."""
    cost_saved: float | None = None
    """What its batch answers would have cost at the live price, less what they cost
    (None: not a batch run, or no price known)."""
    conversations: int | None = None
    """With `--turns all`: the conversations whole on disk (its `samples` are their turns
    and those of conversations not finished yet); None with `--turns last`."""
    turns_mean: float | None = None
    """With `--turns all`: the turns per conversation its writer plans one not finished at
    (the mean of those queued so far), what a watching panel needs for the ETA since
    `--max-samples` counts conversations; None with `--turns last`."""
    plan: PlanView | None = None
    """The fleet plan of the run writing it (the same in each of the run's datasets; None:
    the run is not planned, or has not planned yet)."""
    lanes: dict[str, int] = field(default_factory=dict)
    """Its tokens of this run per lane (a fleet run's; empty otherwise)."""

    @property
    def fraction(self) -> float | None:
        if self.max_tokens:
            return min(1.0, self.tokens / self.max_tokens)
        if self.max_samples:  # with `--turns all` it counts conversations
            done = self.samples if self.conversations is None else self.conversations
            return min(1.0, done / self.max_samples)
        return None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = str(self.state)
        data["quality"] = self.quality.to_json() if self.quality is not None else None
        data["batches"] = [batch.to_json(self.updated_at) for batch in self.batches]
        data["plan"] = self.plan.to_json() if self.plan is not None else None
        data["version"] = PROGRESS_VERSION
        return data


@dataclass(frozen=True, slots=True)
class BudgetEvent:
    """A dataset crossing its token budget, or finishing: what a UI announces, as data.

    "crossed" comes when the count first reaches the budget (in-flight requests still
    arriving); "done" or "exhausted" once the dataset has finished, with the final count.
    """

    dataset: str
    kind: str
    tokens: int
    samples: int
    max_tokens: int | None


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    datasets: tuple[DatasetSnapshot, ...]
    concurrency: int
    inflight: int
    utilisation: float
    elapsed_s: float
    active_s: float
    stopping: bool
    paused: bool
    servers: dict[str, str] = field(default_factory=dict)
    """Each server URL's state: "ok", or why it is not."""
    concurrency_limit: int | None = None
    max_total_tokens: int | None = None
    server_metrics: dict[str, ServerMetrics | None] = field(default_factory=dict)
    """Each server's load from its /metrics, when it serves them (None: it serves none)."""
    server_workers: dict[str, tuple[WorkerLoad, ...]] = field(default_factory=dict)
    """Each router's workers, with their loads (a server that is no router is absent)."""
    gpus: tuple[tuple[Gpu, tuple[float, ...]], ...] = ()
    """This machine's GPUs (NVML), each with its recent utilisation 0..1, oldest first."""
    concurrency_auto: str | None = None
    """Under `--concurrency auto`, why `concurrency` is what it is now (None: fixed)."""

    def servers_json(self) -> dict[str, dict[str, Any]]:
        """`servers` as progress.json carries them: the state and the load of each, and a
        router's workers."""
        result: dict[str, dict[str, Any]] = {}
        for url, state in self.servers.items():
            metrics = self.server_metrics.get(url)
            result[url] = {"state": state, "metrics": metrics.to_json() if metrics else None}
            if url in self.server_workers:
                result[url]["workers"] = [w.to_json() for w in self.server_workers[url]]
        return result

    def pool_json(self) -> dict[str, Any]:
        """The shared pool as each dataset's progress.json carries it: one file tells which
        of the run's datasets are active, waiting or done, and how full the slots were."""
        return {
            "concurrency": self.concurrency,
            "inflight": self.inflight,
            "utilisation": self.utilisation,
            "active_s": self.active_s,
            "max_total_tokens": self.max_total_tokens,
            "tokens": self.tokens,
            "states": {d.name: str(d.state) for d in self.datasets},
        }

    @property
    def cost(self) -> float | None:
        costs = [d.cost for d in self.datasets if d.cost is not None]
        return sum(costs) if costs else None

    @property
    def tokens(self) -> int:
        return sum(d.tokens for d in self.datasets)

    @property
    def tok_s(self) -> float:
        return sum(d.tok_s for d in self.datasets)
