"""What a run is asked to do: datasets, servers, budgets and limits.

Kept apart from the engine so that the CLI and the TUI can parse and show a run's
configuration without importing aiohttp and the engine (a quarter of a second at startup).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen_tui.backends.budget.crossing import DEFAULT_CROSSING_ANSWER, CrossingAnswer
from gen_tui.backends.budget.rules import BudgetMode, share_total
from gen_tui.backends.config.lanes import LaneSpec, parse_lanes
from gen_tui.backends.plan import parse_deadline
from gen_tui.backends.settings import (
    AUTO,
    AUTO_MAX_CONCURRENCY,
    BATCH_IN_FLIGHT,
    BATCH_MAX_MB,
    BATCH_MAX_REQUESTS,
    BATCH_POLL_S,
    BATCH_PRICE_SHARE,
    DEFAULT_CONCURRENCY,
    DEFAULT_GRACE_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    DEFAULT_SERVER,
    DEFAULT_TRUNCATED_WARN,
    MAX_NEW_TOKENS_CAP,
    SettingError,
    convert_settings,
    setting,
)
from gen_tui.backends.store.conversations import Turns
from gen_tui.backends.store.prompts import check_dataset_name

APIS = ("sglang", "openai", "openai-batch")
"""`openai-batch`: the OpenAI path's URL and key rules, its prompts sent as batches
(backends/engine/batch_lane.py) at about half the price."""
DEFAULT_KEY_VARIABLES = ("OPENROUTER_API_KEY", "OPENAI_API_KEY")
CREDIT_PROBE_S = 300.0
DISK_PROBE_S = 5.0


class EngineError(Exception):
    """A problem that stops the run before or while it starts; the message is for the user."""


def price_arg(text: str) -> tuple[float, float]:
    """`--price IN,OUT`: dollars per million input and output tokens."""
    try:
        price = tuple(float(part) for part in text.split(","))
    except ValueError:
        price = ()
    if len(price) != 2 or min(price) < 0:
        raise SettingError(f"--price {text!r}: expected IN,OUT dollars per million")
    return price  # len() above narrows it to (float, float)


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset of a run: a `[[datasets]]` entry of a config file, or a prompt file of
    `--prompts-dir` with the budgets `DatasetDefaults` give every dataset."""

    name: str = setting(key="name", kinds=(str,))
    prompts: Path = setting(key="prompts", kinds=(str,), path=True)
    max_tokens: int | None = setting(
        None, key="max_tokens", kinds=(int, str), count=True, minimum=1
    )
    max_samples: int | None = setting(
        None, key="max_samples", kinds=(int, str), count=True, minimum=1
    )
    weight: float = setting(1.0, key="weight", kinds=(int, float), above=0)
    """Its share of `max_total_tokens` against the other datasets'."""

    def __post_init__(self) -> None:
        check_dataset_name(self.name)
        try:
            convert_settings(self)
        except SettingError as exc:
            raise EngineError(f"{self.name}: {exc}") from None


@dataclass(frozen=True)
class DatasetDefaults:
    """What `[run]` and `gen-tui run`'s flags say of every dataset: where the prompt files
    are and each one's budget (a `[[datasets]]` entry's own budget wins over these)."""

    prompts_dir: Path | None = setting(
        None,
        key="prompts_dir",
        group="datasets",
        flag="--prompts-dir",
        kinds=(str,),
        path=True,
        help="each NAME.jsonl in DIR is dataset NAME",
        flag_kwargs={"type": Path},
    )
    max_tokens: int | None = setting(
        None,
        key="max_tokens_per_dataset",
        group="budgets",
        flag="--max-tokens-per-dataset",
        aliases=("--token-budget",),
        kinds=(int, str),
        count=True,
        minimum=1,
        help="stop each dataset at this many completion tokens",
    )
    max_samples: int | None = setting(
        None,
        key="max_samples",
        group="budgets",
        flag="--max-samples",
        kinds=(int, str),
        count=True,
        minimum=1,
        help="stop each dataset at N records (with --turns all: N whole conversations)",
    )


@dataclass(frozen=True)
class Sampling:
    """The `[sampling]` keys gen-tui knows (SGLang's names; the OpenAI path maps them), and
    the three that are flags too. None: not sent, the server's default applies."""

    max_new_tokens: int | None = setting(
        None,
        key="max_new_tokens",
        group="sampling",
        flag="--max-new-tokens",
        kinds=(int, str),
        count=True,
        minimum=1,
        help="longest answer, in tokens; never above the server's context minus the prompt "
        f"(default: that, capped at {MAX_NEW_TOKENS_CAP}; {DEFAULT_MAX_NEW_TOKENS} when the "
        "server does not say its context length)",
    )
    temperature: float | None = setting(
        None,
        key="temperature",
        group="sampling",
        flag="--temperature",
        kinds=(int, float),
        minimum=0,
        help="sampling temperature (0: greedy)",
        flag_kwargs={"type": float},
    )
    top_p: float | None = setting(
        None,
        key="top_p",
        group="sampling",
        flag="--top-p",
        kinds=(int, float),
        above=0,
        maximum=1,
        help="nucleus sampling: the smallest set of tokens whose probability reaches P",
        flag_kwargs={"type": float},
    )
    top_k: int | None = setting(None, key="top_k", kinds=(int,))
    min_p: float | None = setting(None, key="min_p", kinds=(int, float), minimum=0, maximum=1)
    stop: list[str] | None = setting(None, key="stop", kinds=(list,))
    stop_token_ids: list[int] | None = setting(None, key="stop_token_ids", kinds=(list,))
    ignore_eos: bool | None = setting(None, key="ignore_eos", kinds=(bool,))
    skip_special_tokens: bool | None = setting(None, key="skip_special_tokens", kinds=(bool,))
    frequency_penalty: float | None = setting(None, key="frequency_penalty", kinds=(int, float))
    presence_penalty: float | None = setting(None, key="presence_penalty", kinds=(int, float))
    repetition_penalty: float | None = setting(None, key="repetition_penalty", kinds=(int, float))

    def __post_init__(self) -> None:
        convert_settings(self)


@dataclass(frozen=True)
class EngineHooks:
    """What tests, benchmarks and the demo set on a run and no user does: none is a flag or
    a config key, and a run without hooks is a user's run."""

    auto_start: int | None = None
    """Where `--concurrency auto` starts (None: autotune.START)."""
    gpu_telemetry: str | None = None
    """Where the GPUs shown beside this run come from, when not from this machine: None reads
    this machine's through NVML; a phrase ("simulated (demo)...") is said once in the log
    instead, and NVML is not read (the demo's GPUs are simulated)."""
    seed: int | None = None
    """The retries' jitter, made repeatable."""
    sim_dataset_header: bool = False
    """Send the simulator's X-Sim-Dataset header with each chat (a real provider must never
    be told the run's dataset names)."""


def queued_concurrency(running: int) -> int:
    """A concurrency that keeps a queue at servers running `running` requests at once."""
    return running + max(8, running // 4)


@dataclass
class EngineConfig:
    """What one run is asked to do. The fields made with :func:`setting` are the run's
    settings: the `[run]` keys of a config file and the flags of `gen-tui run`, with their
    defaults here and nowhere else."""

    datasets: list[DatasetSpec]
    server_urls: list[str] = setting(
        default_factory=lambda: [DEFAULT_SERVER],
        key="server_urls",
        flag="--server-url",
        kinds=(list,),
        help="SGLang server or router URL; repeat to use several",
        flag_kwargs={"action": "append", "metavar": "URL"},
    )
    tokenizer: str = setting(
        "",
        key="tokenizer",
        flag="--tokenizer",
        kinds=(str,),
        help="tokenizer directory of the served model",
    )
    output_dir: Path = setting(
        Path("output"),
        key="output_dir",
        group="datasets",
        flag="--output-dir",
        kinds=(str,),
        path=True,
        help="dataset folders go here",
        flag_kwargs={"type": Path},
    )
    concurrency: int | str = setting(
        DEFAULT_CONCURRENCY,
        key="concurrency",
        flag="--concurrency",
        kinds=(int, str),
        count=True,
        minimum=1,
        words=(AUTO,),
        help="requests in flight across all datasets, or auto: tuned to the servers' load "
        "(their /metrics: queue, KV use, retractions; else the token rate)",
    )
    sampling: dict[str, Any] = field(default_factory=dict)
    """SGLang-style sampling parameters. Without `max_new_tokens` each request's cap comes
    from the server's context length (see answer_cap.py)."""
    budget_mode: BudgetMode = setting(
        BudgetMode.PREDICTIVE,
        key="budget_mode",
        group="budgets",
        flag="--budget-mode",
        kinds=(str,),
        choices=tuple(mode.value for mode in BudgetMode),
        help="drain: seed behaviour; predictive: ends at or just past the budget; strict: "
        "never past it; precise: as near the budget as it can, either side: the last answers "
        "go one at a time, each only if room left + mean answer >= the 95th percentile of the "
        "lengths seen, so it may stop short by up to that percentile less the mean (about two "
        "mean answers; no room for one more)",
    )
    crossing_answer: CrossingAnswer = setting(
        DEFAULT_CROSSING_ANSWER,
        key="crossing_answer",
        group="budgets",
        flag="--crossing-answer",
        kinds=(str,),
        choices=tuple(policy.value for policy in CrossingAnswer),
        help="predictive and precise: cut: the last answer a dataset sends alone may run to "
        "the room left + one mean answer (finish_reason length), so the budget is passed by "
        "at most that; whole: it runs to max_new_tokens (never an answer shortened, "
        "2.6-2.9 mean answers past at p95)",
    )
    turns: Turns = setting(
        Turns.LAST,
        key="turns",
        group="datasets",
        flag="--turns",
        kinds=(str,),
        choices=tuple(turns.value for turns in Turns),
        help="last: regenerate the answer to each conversation's last user turn; all: "
        "every assistant turn, in order, each request carrying the regenerated history (one "
        "record per turn, one turn in flight per conversation)",
    )
    server_affinity: bool = setting(
        True,
        key="server_affinity",
        group="datasets",
        flag="--no-server-affinity",
        kinds=(bool,),
        help="with --turns all, send each turn to any server with room, not to the one that "
        "answered the conversation's turn before (whose prefix cache holds its history; "
        "for measuring what that keeps, as bench multiturn does)",
        flag_kwargs={"action": "store_false", "default": None},
    )
    max_prompt_tokens: int = setting(
        DEFAULT_MAX_PROMPT_TOKENS,
        key="max_prompt_tokens",
        group="datasets",
        flag="--max-prompt-tokens",
        kinds=(int, str),
        count=True,
        minimum=1,
        help="a prompt longer than this many tokens is skipped and reported, never sent "
        "(counted where prompts are tokenized: always with --api sglang, with --tokenizer "
        "for --api openai)",
    )
    """Why a cap, and why 32,768: a prompt file is data from elsewhere, and one huge prompt
    costs a server a long prefill and a slot's share of its KV cache for an answer most
    servers refuse anyway once it is past their context window. 32k tokens is the context
    most served models take; a run on a long-context model raises it."""
    truncated_warn: float = setting(
        DEFAULT_TRUNCATED_WARN,
        key="truncated_warn",
        group="datasets",
        flag="--warn-truncated",
        kinds=(int, float),
        minimum=0,
        help="percent of a dataset's answers cut at max_new_tokens past which the run warns "
        "(log and panel)",
        flag_kwargs={"type": float, "metavar": "PERCENT"},
    )
    stream: bool = setting(
        False,
        key="stream",
        flag="--stream",
        kinds=(bool,),
        help="use SSE streaming",
        flag_kwargs={"action": "store_true", "default": None},
    )
    max_retries: int = setting(
        6,
        key="max_retries",
        flag="--max-retries",
        kinds=(int,),
        minimum=0,
        help="attempts per sample on errors",
        flag_kwargs={"type": int},
    )
    request_timeout_s: float = setting(
        3600.0,
        key="request_timeout",
        flag="--request-timeout",
        kinds=(int, float),
        above=0,
        help="seconds per request",
        flag_kwargs={"type": float},
    )
    idle_timeout_s: float = setting(
        DEFAULT_IDLE_TIMEOUT_S,
        key="idle_timeout",
        flag="--idle-timeout",
        kinds=(int, float),
        above=0,
        help="seconds a server may go quiet in the middle of an answer, and the most an "
        "answer (or one line of a stream) may take from its first byte to its end; the wait "
        "for the first byte (queue, prefill) is bounded by --request-timeout alone",
        flag_kwargs={"type": float},
    )
    grace_s: float = setting(
        DEFAULT_GRACE_S,
        key="grace",
        group="budgets",
        flag="--grace",
        kinds=(int, float),
        minimum=0,
        help="seconds to drain in-flight requests on SIGTERM",
        flag_kwargs={"type": float},
    )
    lookahead: int | None = None
    parallel_datasets: int = setting(
        1,
        key="parallel_datasets",
        flag="--parallel-datasets",
        kinds=(int,),
        count=True,
        minimum=1,
        help="datasets sharing the slots at once; with 1 they run in order, the next one "
        "filling the slots the previous leaves free",
    )
    max_total_tokens: int | None = setting(
        None,
        key="max_total_tokens",
        group="budgets",
        flag="--max-total-tokens",
        kinds=(int, str),
        count=True,
        minimum=1,
        help="a budget across the selected datasets, shared by weight (equal by default); a "
        "dataset that runs out of prompts hands its share to the others",
    )
    api: str = setting(
        "sglang",
        key="api",
        flag="--api",
        kinds=(str,),
        choices=APIS,
        help="sglang: native /generate; openai: /v1/chat/completions (OpenRouter, vLLM, "
        "SGLang /v1); openai-batch: the same requests through the Batch API, at about half "
        "the price and hours of latency",
    )
    model: str | None = setting(
        None, key="model", flag="--model", kinds=(str,), help="model name for --api openai"
    )
    api_key_env: str | None = setting(
        None,
        key="api_key_env",
        flag="--api-key-env",
        kinds=(str,),
        help="environment variable holding the API key (default OPENROUTER_API_KEY, then "
        "OPENAI_API_KEY); keys are never taken on the command line",
    )
    price_per_million: tuple[float, float] | None = setting(
        None,
        key="price_per_million",
        flag="--price",
        kinds=(list,),
        help="IN,OUT dollars per million tokens, when the server does not report usage.cost",
        flag_kwargs={"type": price_arg, "metavar": "IN,OUT"},
    )
    max_cost: float | None = setting(
        None,
        key="max_cost",
        group="budgets",
        flag="--max-cost",
        kinds=(int, float),
        minimum=0,
        help="stop dispatching once this many dollars are spent",
        flag_kwargs={"type": float},
    )
    batch_max_requests: int = setting(
        BATCH_MAX_REQUESTS,
        key="batch_max_requests",
        group="server",
        flag="--batch-max-requests",
        kinds=(int,),
        minimum=1,
        help="--api openai-batch: the most requests in one batch (OpenAI's limit)",
        flag_kwargs={"type": int},
    )
    batch_max_mb: float = setting(
        BATCH_MAX_MB,
        key="batch_max_mb",
        group="server",
        flag="--batch-max-mb",
        kinds=(int, float),
        above=0,
        help="--api openai-batch: the largest batch input file, in MB (OpenAI's limit)",
        flag_kwargs={"type": float},
    )
    batch_in_flight: int = setting(
        BATCH_IN_FLIGHT,
        key="batch_in_flight",
        group="server",
        flag="--batch-in-flight",
        kinds=(int,),
        minimum=1,
        help="--api openai-batch: the most batches open at the provider at once",
        flag_kwargs={"type": int},
    )
    batch_poll_s: float = setting(
        BATCH_POLL_S,
        key="batch_poll",
        group="server",
        flag="--batch-poll",
        kinds=(int, float),
        above=0,
        help="--api openai-batch: seconds between polls of a batch in flight",
        flag_kwargs={"type": float},
    )
    batch_live_finish: float = setting(
        0.0,
        key="batch_live_finish",
        group="server",
        flag="--batch-live-finish",
        kinds=(int, float),
        minimum=0,
        maximum=1,
        help="--api openai-batch: the share of a dataset's token budget sent as live requests "
        "at its end (at the live price), so it ends as close to its budget as a live run "
        "(best with --budget-mode precise); 0: batches to the end",
        flag_kwargs={"type": float},
    )
    batch_price_share: float = BATCH_PRICE_SHARE
    lanes: list[str] = setting(
        default_factory=list,
        key="lanes",
        flag="--lane",
        kinds=(list,),
        check=parse_lanes,
        help="a server of a mixed fleet: NAME=URL[,api=sglang|openai|openai-batch]"
        "[,price=IN/OUT][,concurrency=N][,turnaround=D]; repeat for each (a lane without a "
        "price is free; one api=openai-batch lane at most, turnaround= its expected batch "
        "time); they replace --server-url, and the planner splits the tokens over them",
        flag_kwargs={"action": "append", "metavar": "LANE"},
    )
    plan_every: float = setting(
        60.0,
        key="plan_every",
        group="budgets",
        flag="--plan-every",
        kinds=(int, float),
        above=0,
        help="seconds between the fleet planner's re-plans from the lanes' measured rates "
        "at most (nearer a deadline than ten of them: a tenth of the time left, not under 5 s)",
        flag_kwargs={"type": float},
    )
    deadline: str | None = setting(
        None,
        key="deadline",
        group="budgets",
        flag="--deadline",
        kinds=(str,),
        check=parse_deadline,
        help="finish by this time of day (07:30) or within this long (8h, 90m): the fleet "
        "planner buys priced lanes' tokens only as the deadline needs, within --max-cost",
        flag_kwargs={"metavar": "WHEN"},
    )
    credit_probe_s: float = CREDIT_PROBE_S
    disk_probe_s: float = setting(
        DISK_PROBE_S,
        key="disk_probe",
        group="budgets",
        flag="--disk-probe",
        kinds=(int, float),
        above=0,
        help="while the disk is full, seconds between tries to write the answers held in "
        "memory; dispatch waits meanwhile",
        flag_kwargs={"type": float},
    )
    snapshot_interval_s: float = 0.25
    progress_interval_s: float = 1.0
    metrics_interval_s: float = 2.0
    """Seconds between reads of each server's /metrics: fresh enough to watch a queue form,
    and a cost no server notices (SGLang renders it in about a millisecond)."""
    hooks: EngineHooks = field(default_factory=EngineHooks)

    def __post_init__(self) -> None:
        try:
            convert_settings(self)
        except SettingError as exc:
            raise EngineError(str(exc)) from None
        self.budget_mode = BudgetMode(self.budget_mode)
        self.crossing_answer = CrossingAnswer(self.crossing_answer)
        self.turns = Turns(self.turns)
        if self.turns is Turns.ALL and self.api == "openai-batch":
            raise EngineError(
                "--turns all cannot go through --api openai-batch: each turn waits on the "
                "answer before it, and a batch answers in hours; use --api openai"
            )
        if self.lanes:
            given = [url for url in self.server_urls if url != DEFAULT_SERVER]
            if given:
                raise EngineError(
                    f"--server-url {given[0]} and --lane both given: with lanes, every "
                    "server is a lane (NAME=URL[,...])"
                )
            # The live lanes are the runner's servers; the batch lane, if any, is the batch
            # lane's own (engine/batch_lane.py), never sent a live request.
            self.server_urls = [lane.url for lane in self.fleet if not lane.batch]
        self.output_dir = Path(self.output_dir)
        for url in self.server_urls:
            # Refused here, before any connection: aiohttp takes "127.0.0.1:31555/health" as
            # a URL of scheme "127.0.0.1" and fails with a message that only repeats it.
            if isinstance(url, str) and "://" not in url:
                raise EngineError(
                    f"server URL {url!r} has no scheme: write http://{url} (or https://)"
                )
        if self.api == "openai-batch" and len(self.server_urls) > 1:
            # A batch is polled and downloaded where it was created, and its journal names
            # no URL: batches spread over several would be looked for at the first one by
            # a restarted run (and several providers' batches are one run each, anyway).
            raise EngineError(
                f"--api openai-batch takes one --server-url, not {len(self.server_urls)}: "
                "a batch lives at the provider that created it; run one gen-tui per provider"
            )

    @property
    def fleet(self) -> list[LaneSpec]:
        """The lanes of a mixed fleet (`--lane`); empty for a run over `--server-url`s."""
        return parse_lanes(self.lanes)

    @property
    def batch_lane(self) -> LaneSpec | None:
        """The fleet's batch lane (`--lane NAME=URL,api=openai-batch`), if it has one."""
        return next((lane for lane in self.fleet if lane.batch), None)

    @property
    def planned(self) -> bool:
        """Whether the fleet planner decides each lane's tokens (lanes, or a deadline)."""
        return bool(self.lanes) or self.deadline is not None

    def planned_budgets(self) -> dict[str, int | None]:
        """Each dataset's token budget as a run starts: its own, or its share of the total
        (what a panel shows before the run does)."""
        planned = {spec.name: spec.max_tokens for spec in self.datasets}
        if self.max_total_tokens is not None:
            planned.update(
                share_total(
                    self.max_total_tokens,
                    {spec.name: spec.weight for spec in self.datasets},
                    planned,
                    {},
                )
            )
        return planned

    @property
    def auto_concurrency(self) -> bool:
        """`--concurrency auto`: the engine picks the requests in flight (see autotune.py);
        never over lanes, which each hold their own."""
        return self.concurrency == AUTO and not self.lanes

    def lane_concurrency(self, lane: LaneSpec) -> int:
        """A lane's requests in flight: its own, else the run's --concurrency."""
        each = DEFAULT_CONCURRENCY if self.concurrency == AUTO else int(self.concurrency)
        return lane.concurrency or each

    @property
    def max_concurrency(self) -> int:
        """The most requests in flight: the user's number, or auto's ceiling."""
        if self.lanes:
            return sum(self.lane_concurrency(lane) for lane in self.fleet if not lane.batch)
        return AUTO_MAX_CONCURRENCY if self.concurrency == AUTO else int(self.concurrency)

    @property
    def max_new_tokens_given(self) -> int | None:
        """The user's `max_new_tokens` (flag or [sampling]); None: the server's rule applies."""
        given = self.sampling.get("max_new_tokens")
        return None if given is None else int(given)


def resolve_api_key(config: EngineConfig) -> tuple[str | None, str]:
    """(key, the variable to name in messages) for an OpenAI-compatible API.

    The key only ever comes from the environment; it is never logged or written anywhere.
    White space around it (a `\r` left by a file saved on Windows, a pasted newline) is
    dropped; a control character or space inside it is refused, naming the variable, since
    every request would otherwise fail as a malformed one.
    """
    names = (config.api_key_env,) if config.api_key_env else DEFAULT_KEY_VARIABLES
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            if any(char.isspace() or not char.isprintable() for char in value):
                raise EngineError(
                    f"{name} holds a space or a control character inside the key: "
                    "set it to the key alone"
                )
            return value, name
    return None, " or ".join(names)
