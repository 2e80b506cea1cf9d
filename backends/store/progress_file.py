"""progress.json: one writer, and one reader that never raises.

Each dataset folder of a live gen-tui run holds a `progress.json`, replaced atomically a
few times a second: what only the writer knows (its state, budget, in-flight requests,
errors, cost), with the shared pool of the run. It is a view, not data: the token and
sample counts a client shows come from the record file. The file crosses hosts (the
watcher carries it as parsed JSON) and may come from another version of gen-tui, so the
reader takes whatever is there and ignores, field by field, what has the wrong type: one
odd field costs that field alone, never the dataset or the panel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen_tui.backends.bounds import COUNT, DOLLARS, PID, Range
from gen_tui.backends.budget.rules import BudgetMode
from gen_tui.backends.progress.batches import BatchView, parse_batches
from gen_tui.backends.progress.plan_view import PlanView, lane_split
from gen_tui.backends.progress.quality import Quality
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.backends.store.records import write_json_atomic
from gen_tui.backends.telemetry.metrics import ServerMetrics
from gen_tui.backends.telemetry.workers import WorkerLoad, workers_from_json
from gen_tui.backends.watcher import (
    PROGRESS_FILE,
    PROGRESS_MAX_BYTES,
    BadFile,
    read_json_object,
)

# A file that names no budget mode comes from a writer that had only this one.
DEFAULT_BUDGET_MODE = str(BudgetMode.PREDICTIVE)

__all__ = [
    "DEFAULT_BUDGET_MODE",
    "PROGRESS_FILE",
    "PoolFigures",
    "ProgressFile",
    "ServerReport",
    "merge_writer_reports",
]

MAX_SERVERS = 64
"""The most servers read from one file (a run names a few; a hostile file could name 1e6)."""


@dataclass(frozen=True)
class ServerReport:
    """What a run's writer says of one of its servers: its state and its load."""

    state: str
    """"ok" or why not (the writer's words: untrusted, shown through untrusted.one_line)."""
    metrics: ServerMetrics | None = None
    """None: the server serves no /metrics (or, when not `told`, nobody asked it)."""
    told: bool = True
    """Whether the writer says the load at all: a version 1 file does not."""
    workers: tuple[WorkerLoad, ...] | None = None
    """A router's workers and their loads (`metrics` is then their sum); None: the server
    is no router, or the writer predates the field."""


def merge_writer_reports(found: dict[str, ServerReport], said: Mapping[str, ServerReport]) -> None:
    """Add to `found` (the servers as read on their box) what a run's writer `said` of them:
    each server it names that `found` lacks, and a router it read the workers of. The box
    reads a router's own URL, which serves no /metrics (sglang-router 0.3.2 answers 404),
    where the writer read each worker and summed them."""
    for url, report in said.items():
        known = found.get(url)
        if known is None or (report.workers is not None and known.workers is None):
            found[url] = report


@dataclass(frozen=True)
class PoolFigures:
    """The run's shared pool as its writer last said it: requests in flight of its limit.

    The same in each dataset's file of one run, so a reader counts it once per writer."""

    inflight: int
    concurrency: int


def _pool(value: Any) -> PoolFigures | None:
    """progress.json's `pool`: its `inflight` and `concurrency` counts, both or neither
    (None also for a writer that predates the field, or odd values: no made-up figure)."""
    if not isinstance(value, Mapping):
        return None
    inflight, concurrency = value.get("inflight"), value.get("concurrency")
    counts = [
        n
        for n in (inflight, concurrency)
        if isinstance(n, int) and not isinstance(n, bool) and COUNT.check(n) is not None
    ]
    if len(counts) != 2:
        return None
    return PoolFigures(counts[0], counts[1])


def _servers(value: Any) -> dict[str, ServerReport] | None:
    """progress.json's `servers`: version 2 maps a URL to {"state", "metrics"} (and a
    router's to its "workers" too), version 1 to the state alone; entries of another shape
    are left out."""
    if not isinstance(value, Mapping):
        return None
    servers: dict[str, ServerReport] = {}
    for url, entry in list(value.items())[:MAX_SERVERS]:
        if not isinstance(url, str):
            continue
        if isinstance(entry, str):
            servers[url] = ServerReport(entry, told=False)
        elif isinstance(entry, Mapping):
            state = entry.get("state")
            workers = entry.get("workers")
            servers[url] = ServerReport(
                state if isinstance(state, str) else "",
                ServerMetrics.from_json(entry.get("metrics")),
                workers=workers_from_json(workers) if workers is not None else None,
            )
    return servers


@dataclass(frozen=True)
class ProgressFile:
    """The fields of a progress.json that clients read (None: absent or of a wrong type)."""

    pid: int | None = None
    state: DatasetState | None = None
    """None also for a state this version does not know."""
    max_tokens: int | None = None
    max_samples: int | None = None
    budget_mode: str | None = None
    inflight: int | None = None
    errors: int | None = None
    message: str | None = None
    cost: float | None = None
    truncated: int | None = None
    """The records cut at max_new_tokens, of `truncated_of` (both or neither): the whole
    file's, resumed records included."""
    truncated_of: int | None = None
    truncated_warn: float | None = None
    quality: Quality | None = None
    """Finish reasons, length and latency histograms, top errors (bounded; see quality.py)."""
    prompts_left: int | None = None
    budget_note: str | None = None
    """Said once by its writer when the budget is too small for the pool (see
    budget/expected.py): shown on the panel as the writer's own words, cleaned and cut."""
    batches: tuple[BatchView, ...] | None = None
    """The dataset's batches in flight (`--api openai-batch`), as its writer last polled
    them (ids and statuses cleaned and cut; see progress/batches.py)."""
    cost_saved: float | None = None
    """Its batch answers' cost at the live price less what they cost."""
    conversations: int | None = None
    """With `--turns all`: the conversations whole on disk (see DatasetSnapshot)."""
    turns_mean: float | None = None
    """With `--turns all`: the turns per conversation its writer plans at (at least 1)."""
    servers: dict[str, ServerReport] | None = None
    """The run's servers, by URL (the same in each dataset's file of the run)."""
    plan: PlanView | None = None
    """The run's fleet plan (bounded, see progress/plan_view.py); None: no plan, or a writer
    that predates it."""
    lanes: dict[str, int] | None = None
    """The dataset's tokens of this run per fleet lane."""
    pool: PoolFigures | None = None
    """The run's pool: in flight of its limit (None: absent, odd, or an older writer)."""
    ignored: tuple[str, ...] = ()
    """The fields that were present but of the wrong type or out of their range (bounds.py):
    for a note, never an error."""

    # the writer

    @staticmethod
    def payload(run: RunSnapshot, dataset: DatasetSnapshot) -> dict[str, Any]:
        """What a dataset's progress.json holds: its snapshot, the servers and the pool."""
        payload = dataset.to_json()
        payload["servers"] = run.servers_json()
        payload["pool"] = run.pool_json()
        return payload

    @staticmethod
    def write(path: Path, run: RunSnapshot, dataset: DatasetSnapshot) -> None:
        """Replace `path` atomically (readers see the old or the new file, never a mix).

        Raises OSError: the caller decides how loud a failed view is.
        """
        write_json_atomic(path, ProgressFile.payload(run, dataset))

    # the reader

    @classmethod
    def parse(cls, value: Any) -> ProgressFile | None:
        """The fields of parsed progress.json content; None when it is no JSON object."""
        if not isinstance(value, Mapping):
            return None
        ignored: list[str] = []

        def pick(name: str, *types: type, bounds: Range | None = None) -> Any:
            """The field `name` when of one of `types` (and a number in `bounds`' range,
            where given: a writer's 1e308 is no count), else None, named in `ignored`."""
            field = value.get(name)
            if field is None:
                return None
            if isinstance(field, bool) or not isinstance(field, types):
                ignored.append(name)
                return None
            if bounds is not None and bounds.check(field) is None:
                ignored.append(name)
                return None
            return field

        state = pick("state", str)
        try:
            known = DatasetState(state) if state is not None else None
        except ValueError:
            known = None
        cost = pick("cost", int, float, bounds=DOLLARS)
        truncated = pick("truncated", int, bounds=COUNT)
        truncated_of = pick("truncated_of", int, bounds=COUNT)
        if truncated is not None and not 0 <= truncated <= (truncated_of or 0):
            ignored.append("truncated")  # a share past 100% or below 0 is no share
            truncated = truncated_of = None
        warn = pick("truncated_warn", int, float, bounds=COUNT)
        prompts_left = pick("prompts_left", int, bounds=COUNT)
        if prompts_left is not None and prompts_left < 0:
            ignored.append("prompts_left")
            prompts_left = None
        quality = Quality.parse(value.get("quality"))
        if quality is None and value.get("quality") is not None:
            ignored.append("quality")
        batches = parse_batches(value.get("batches"))
        if batches is None and value.get("batches") is not None:
            ignored.append("batches")
        saved = pick("cost_saved", int, float, bounds=DOLLARS)
        turns_mean = pick("turns_mean", int, float, bounds=COUNT)
        if turns_mean is not None and turns_mean < 1:
            ignored.append("turns_mean")  # a conversation has one turn at least
            turns_mean = None
        servers = _servers(value.get("servers"))
        if servers is None and value.get("servers") is not None:
            ignored.append("servers")
        plan = PlanView.from_json(value.get("plan"))
        if plan is None and value.get("plan") is not None:
            ignored.append("plan")
        pool = _pool(value.get("pool"))
        if pool is None and value.get("pool") is not None:
            ignored.append("pool")
        lanes = lane_split(value.get("lanes"))
        if lanes is None and value.get("lanes") is not None:
            ignored.append("lanes")
        return cls(
            pid=pick("pid", int, bounds=PID),
            state=known,
            max_tokens=pick("max_tokens", int, bounds=COUNT),
            max_samples=pick("max_samples", int, bounds=COUNT),
            budget_mode=pick("budget_mode", str),
            inflight=pick("inflight", int, bounds=COUNT),
            errors=pick("errors", int, bounds=COUNT),
            message=pick("message", str),
            cost=float(cost) if cost is not None else None,
            truncated=truncated,
            truncated_of=truncated_of if truncated is not None else None,
            truncated_warn=float(warn) if warn is not None and warn >= 0 else None,
            quality=quality,
            prompts_left=prompts_left,
            budget_note=pick("budget_note", str) or None,
            batches=batches,
            cost_saved=float(saved) if saved is not None else None,
            conversations=pick("conversations", int, bounds=COUNT),
            turns_mean=float(turns_mean) if turns_mean is not None else None,
            servers=servers,
            plan=plan,
            lanes=lanes or None,
            pool=pool,
            ignored=tuple(ignored),
        )

    @classmethod
    def read(cls, path: Path) -> ProgressFile | None:
        """The progress.json at `path`; None when it is absent, unreadable or not an object.

        Read as the watcher reads it: a regular file only (a FIFO would block, a symlink
        could point anywhere), at most PROGRESS_MAX_BYTES, nested no deeper than a real one.
        """
        try:
            return cls.parse(read_json_object(str(path), PROGRESS_MAX_BYTES))
        except (OSError, BadFile):
            return None
