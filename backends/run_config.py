"""What a run is asked to do: datasets, servers, budgets and limits.

Kept apart from the engine so that the CLI and the TUI can parse and show a run's
configuration without importing aiohttp and the engine (a quarter of a second at startup).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen_tui.backends.budget import BudgetMode, share_total
from gen_tui.backends.prompts import check_dataset_name

DEFAULT_CONCURRENCY = 64
APIS = ("sglang", "openai")
DEFAULT_KEY_VARIABLES = ("OPENROUTER_API_KEY", "OPENAI_API_KEY")
CREDIT_PROBE_S = 300.0
DISK_PROBE_S = 5.0


class EngineError(Exception):
    """A problem that stops the run before or while it starts; the message is for the user."""


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    prompts: Path
    max_tokens: int | None = None
    max_samples: int | None = None
    weight: float = 1.0

    def __post_init__(self) -> None:
        check_dataset_name(self.name)
        if not self.weight > 0:
            raise EngineError(f"{self.name}: weight must be positive, got {self.weight}")


def queued_concurrency(running: int) -> int:
    """A concurrency that keeps a queue at servers running `running` requests at once."""
    return running + max(8, running // 4)


@dataclass
class EngineConfig:
    datasets: list[DatasetSpec]
    server_urls: list[str]
    tokenizer: str
    output_dir: Path
    concurrency: int = DEFAULT_CONCURRENCY
    sampling: dict[str, Any] = field(default_factory=lambda: {"max_new_tokens": 4096})
    budget_mode: BudgetMode = BudgetMode.PREDICTIVE
    stream: bool = False
    max_retries: int = 6
    request_timeout_s: float = 3600.0
    grace_s: float = 30.0
    lookahead: int | None = None
    parallel_datasets: int = 1
    max_total_tokens: int | None = None
    api: str = "sglang"
    model: str | None = None
    api_key_env: str | None = None
    price_per_million: tuple[float, float] | None = None
    max_cost: float | None = None
    credit_probe_s: float = CREDIT_PROBE_S
    disk_probe_s: float = DISK_PROBE_S
    """Seconds between tries to write the answers held while the disk is full."""
    snapshot_interval_s: float = 0.25
    progress_interval_s: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        self.budget_mode = BudgetMode(self.budget_mode)
        self.output_dir = Path(self.output_dir)
        if self.api not in APIS:
            raise EngineError(f"unknown api {self.api!r} (known: {', '.join(APIS)})")

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
    def max_new_tokens(self) -> int:
        return int(self.sampling.get("max_new_tokens", 128))


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
