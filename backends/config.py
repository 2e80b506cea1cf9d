"""The run configuration file (TOML) and its merge with command-line flags.

A config names the server, tokenizer, sampling settings and the datasets with their
budgets. Paths in it are relative to the file. Unknown keys are errors, because a
misspelt budget that is silently ignored is how a dataset runs 2.6x over.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen_tui.backends.budget import BudgetMode
from gen_tui.backends.counts import CountError, parse_count
from gen_tui.backends.prompts import DatasetNameError, check_dataset_name

RUN_KEYS = {
    "server_urls": list,
    "tokenizer": str,
    "output_dir": str,
    "prompts_dir": str,
    "concurrency": (int, str),
    "budget_mode": str,
    "max_tokens_per_dataset": (int, str),
    "max_samples": (int, str),
    "max_total_tokens": (int, str),
    "parallel_datasets": int,
    "api": str,
    "model": str,
    "api_key_env": str,
    "price_per_million": list,
    "max_cost": (int, float),
    "stream": bool,
    "grace": (int, float),
    "disk_probe": (int, float),
    "max_retries": int,
    "request_timeout": (int, float),
}
SAMPLING_KEYS = {
    "max_new_tokens": (int, str),
    "temperature": (int, float),
    "top_p": (int, float),
    "top_k": int,
    "min_p": (int, float),
    "stop": list,
    "stop_token_ids": list,
    "ignore_eos": bool,
    "skip_special_tokens": bool,
    "frequency_penalty": (int, float),
    "presence_penalty": (int, float),
    "repetition_penalty": (int, float),
}
HOST_KEYS = {
    "name": str,
    "target": str,
    "output_dir": str,
    "pattern": str,
    "command": list,
}
DATASET_KEYS = {
    "name": str,
    "prompts": str,
    "max_tokens": (int, str),
    "max_samples": (int, str),
    "weight": (int, float),
}


class ConfigError(Exception):
    """A config file that cannot be used; the message names the file and the key."""


@dataclass
class DatasetEntry:
    name: str
    prompts: Path
    max_tokens: int | None = None
    max_samples: int | None = None
    weight: float = 1.0


@dataclass
class HostEntry:
    """A machine whose generation runs gen-tui watches and controls.

    `target` is an ~/.ssh/config alias or user@host[:port]; "local" (or no target) means
    this machine. `command` is the run template gen-tui appends quoted flags to.
    """

    name: str
    target: str | None
    output_dir: str
    pattern: str | None = None
    command: list[str] | None = None


@dataclass
class FileConfig:
    path: Path
    run: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    datasets: list[DatasetEntry] = field(default_factory=list)
    hosts: list[HostEntry] = field(default_factory=list)


def _check_table(path: Path, where: str, table: Any, allowed: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{where}] must be a table")
    for key, value in table.items():
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            raise ConfigError(f"{path}: unknown key {where}.{key} (known: {known})")
        kinds = allowed[key] if isinstance(allowed[key], tuple) else (allowed[key],)
        if isinstance(value, bool) and bool not in kinds:
            raise ConfigError(f"{path}: {where}.{key} must not be true/false")
        if not isinstance(value, kinds):
            raise ConfigError(f"{path}: {where}.{key} has the wrong type ({type(value).__name__})")
        if _has_nul(value):
            # TOML allows "\u0000"; no path, URL or command word can hold one, and the OS
            # would refuse it later with a bare ValueError instead of naming the key.
            raise ConfigError(f"{path}: {where}.{key} contains a NUL character")
    return table


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


def count(path: Path, where: str, value: Any) -> int | None:
    """A count from a config value, or None when absent."""
    if value is None:
        return None
    try:
        return parse_count(value, what=where)
    except CountError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _weight(path: Path, where: str, value: float) -> float:
    if not value > 0:
        raise ConfigError(f"{path}: {where}.weight must be positive, got {value}")
    return float(value)


def load_config(path: Path) -> FileConfig:
    """Read and validate `path`; raise :class:`ConfigError` naming what is wrong and where."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    unknown = set(data) - {"run", "sampling", "datasets", "hosts"}
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ConfigError(
            f"{path}: unknown table(s) {names} (known: run, sampling, datasets, hosts)"
        )
    config = FileConfig(path=path)
    config.run = dict(_check_table(path, "run", data.get("run", {}), RUN_KEYS))
    config.sampling = dict(_check_table(path, "sampling", data.get("sampling", {}), SAMPLING_KEYS))
    for key in ("concurrency", "max_tokens_per_dataset", "max_samples", "max_total_tokens"):
        if key in config.run:
            config.run[key] = count(path, f"run.{key}", config.run[key])
    if "max_new_tokens" in config.sampling:
        config.sampling["max_new_tokens"] = count(
            path, "sampling.max_new_tokens", config.sampling["max_new_tokens"]
        )
    if config.run.get("api", "sglang") not in ("sglang", "openai"):
        raise ConfigError(f"{path}: run.api {config.run['api']!r} is not one of sglang, openai")
    price = config.run.get("price_per_million")
    if price is not None and (
        len(price) != 2 or not all(isinstance(p, int | float) and p >= 0 for p in price)
    ):
        raise ConfigError(f"{path}: run.price_per_million must be [input, output] dollars")
    if "budget_mode" in config.run:
        try:
            BudgetMode(config.run["budget_mode"])
        except ValueError:
            modes = ", ".join(m.value for m in BudgetMode)
            raise ConfigError(
                f"{path}: run.budget_mode {config.run['budget_mode']!r} is not one of {modes}"
            ) from None
    base = path.parent
    for key in ("output_dir", "prompts_dir"):
        if key in config.run:
            config.run[key] = str((base / Path(config.run[key]).expanduser()).resolve())
    if "tokenizer" in config.run:
        candidate = base / Path(config.run["tokenizer"]).expanduser()
        if candidate.exists():
            config.run["tokenizer"] = str(candidate.resolve())
    datasets = data.get("datasets", [])
    if not isinstance(datasets, list):
        raise ConfigError(f"{path}: datasets must be an array of tables ([[datasets]])")
    seen: set[str] = set()
    for index, entry in enumerate(datasets):
        where = f"datasets[{index}]"
        _check_table(path, where, entry, DATASET_KEYS)
        for required in ("name", "prompts"):
            if required not in entry:
                raise ConfigError(f"{path}: {where} has no {required!r}")
        try:
            name = check_dataset_name(entry["name"])
        except DatasetNameError as exc:
            raise ConfigError(f"{path}: {where}: {exc}") from None
        if name in seen:
            raise ConfigError(f"{path}: dataset {name!r} is listed twice")
        seen.add(name)
        config.datasets.append(
            DatasetEntry(
                name=name,
                prompts=(base / Path(entry["prompts"]).expanduser()).resolve(),
                max_tokens=count(path, f"{where}.max_tokens", entry.get("max_tokens")),
                max_samples=count(path, f"{where}.max_samples", entry.get("max_samples")),
                weight=_weight(path, where, entry.get("weight", 1.0)),
            )
        )
    config.hosts = _hosts(path, data.get("hosts", []))
    return config


def _hosts(path: Path, hosts: Any) -> list[HostEntry]:
    if not isinstance(hosts, list):
        raise ConfigError(f"{path}: hosts must be an array of tables ([[hosts]])")
    out: list[HostEntry] = []
    for index, entry in enumerate(hosts):
        where = f"hosts[{index}]"
        _check_table(path, where, entry, HOST_KEYS)
        for required in ("name", "output_dir"):
            if required not in entry:
                raise ConfigError(f"{path}: {where} has no {required!r}")
        try:
            check_dataset_name(entry["name"])
        except DatasetNameError:
            raise ConfigError(
                f"{path}: {where}.name {entry['name']!r}: use letters, digits, '.', '_', '-'"
            ) from None
        command = entry.get("command")
        if command is not None and (not command or not all(isinstance(w, str) for w in command)):
            raise ConfigError(f"{path}: {where}.command must be a non-empty list of strings")
        target = entry.get("target")
        out.append(
            HostEntry(
                name=entry["name"],
                target=None if target in (None, "", "local") else target,
                output_dir=entry["output_dir"],
                pattern=entry.get("pattern"),
                command=command,
            )
        )
    if len({host.name for host in out}) != len(out):
        raise ConfigError(f"{path}: two hosts share a name")
    return out
