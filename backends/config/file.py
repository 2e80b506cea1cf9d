"""The run configuration file (TOML) and its merge with command-line flags.

A config names the server, tokenizer, sampling settings and the datasets with their
budgets. Paths in it are relative to the file. Unknown keys are errors, because a
misspelt budget that is silently ignored is how a dataset runs 2.6x over.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen_tui.backends.alerts import AlertConfig, AlertConfigError
from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineError
from gen_tui.backends.figures import CountError, parse_count
from gen_tui.backends.settings import SettingError, settings_of
from gen_tui.backends.store.prompts import DatasetNameError, check_dataset_name, discover_datasets
from gen_tui.backends.telemetry.server_url import MAX_HOST_SERVERS, plain_url
from gen_tui.backends.untrusted import one_line

RUN_SETTINGS = {spelled.setting.key: spelled.setting for spelled in settings_of(EngineConfig)}
"""The `[run]` keys that are engine settings: type, checks and default live with the field."""
RUN_KEYS: dict[str, Any] = {key: spelled.kinds for key, spelled in RUN_SETTINGS.items()} | {
    "prompts_dir": str,
    "max_tokens_per_dataset": (int, str),
    "max_samples": (int, str),
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
    "servers": list,
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
    servers: tuple[str, ...] = ()
    """Servers whose /metrics the watcher reads on the host, beside those its runs' command
    lines name: a run started by a script that takes its URL from elsewhere still shows."""


@dataclass
class FileConfig:
    path: Path
    run: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    datasets: list[DatasetEntry] = field(default_factory=list)
    hosts: list[HostEntry] = field(default_factory=list)
    alerts: AlertConfig = field(default_factory=AlertConfig)


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
    unknown = set(data) - {"run", "sampling", "datasets", "hosts", "alerts"}
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ConfigError(
            f"{path}: unknown table(s) {names} (known: run, sampling, datasets, hosts, alerts)"
        )
    config = FileConfig(path=path)
    config.run = dict(_check_table(path, "run", data.get("run", {}), RUN_KEYS))
    config.sampling = dict(_check_table(path, "sampling", data.get("sampling", {}), SAMPLING_KEYS))
    for key, value in config.run.items():
        if key in RUN_SETTINGS:
            try:
                config.run[key] = RUN_SETTINGS[key].convert(value, f"run.{key}")
            except SettingError as exc:
                raise ConfigError(f"{path}: {exc}") from None
    for key in ("max_tokens_per_dataset", "max_samples"):
        if key in config.run:
            config.run[key] = count(path, f"run.{key}", config.run[key])
    if "max_new_tokens" in config.sampling:
        config.sampling["max_new_tokens"] = count(
            path, "sampling.max_new_tokens", config.sampling["max_new_tokens"]
        )
    price = config.run.get("price_per_million")
    if price is not None:
        if len(price) != 2 or not all(
            isinstance(p, int | float) and not isinstance(p, bool) and p >= 0 for p in price
        ):
            raise ConfigError(f"{path}: run.price_per_million must be [input, output] dollars")
        config.run["price_per_million"] = (float(price[0]), float(price[1]))
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
    alerts = data.get("alerts", {})
    if not isinstance(alerts, dict):
        raise ConfigError(f"{path}: [alerts] must be a table")
    try:
        config.alerts = AlertConfig.parse(alerts)
    except AlertConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
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
                servers=_servers(path, where, entry.get("servers", [])),
            )
        )
    if len({host.name for host in out}) != len(out):
        raise ConfigError(f"{path}: two hosts share a name")
    return out


def _servers(path: Path, where: str, servers: list[Any]) -> tuple[str, ...]:
    """A host's `servers`: plain http(s) URLs (see server_url.py), each once, a bounded few."""
    if len(servers) > MAX_HOST_SERVERS:
        raise ConfigError(
            f"{path}: {where}.servers lists {len(servers)} URLs; at most {MAX_HOST_SERVERS}"
        )
    out: list[str] = []
    for index, url in enumerate(servers):
        plain = plain_url(url) if isinstance(url, str) else None
        if plain is None:
            shown = one_line(repr(url), 120)
            raise ConfigError(
                f"{path}: {where}.servers[{index}] {shown} is not a plain http(s) URL "
                '(like "http://127.0.0.1:30000")'
            )
        if plain not in out:
            out.append(plain)
    return tuple(out)


SAMPLING_FLAGS = ("max_new_tokens", "temperature", "top_p")
"""The sampling parameters `gen-tui run` takes as flags (the rest come from [sampling])."""


def _select(available: dict[str, Any], wanted: str | None) -> list[str]:
    if not wanted:
        return list(available)
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    unknown = [name for name in names if name not in available]
    if unknown:
        known = ", ".join(available) or "none"
        raise EngineError(f"unknown dataset(s) {', '.join(unknown)} (known: {known})")
    return names


def _datasets(file: FileConfig, flags: Mapping[str, Any]) -> list[DatasetSpec]:
    """The selected datasets, each with its budget: the flag's, else its own, else the
    file's `[run]` one."""
    run = file.run
    entries: dict[str, DatasetSpec] = {}
    prompts_dir = flags.get("prompts_dir") or (
        Path(run["prompts_dir"]) if "prompts_dir" in run else None
    )
    if prompts_dir is not None:
        if not prompts_dir.is_dir():
            raise EngineError(f"--prompts-dir {prompts_dir} is not a directory")
        try:
            found = discover_datasets(prompts_dir)
        except DatasetNameError as exc:
            raise EngineError(f"{prompts_dir}: {exc}") from None
        if not found and not file.datasets:
            raise EngineError(f"no *.jsonl prompt files in {prompts_dir}")
        for name, path in found.items():
            entries[name] = DatasetSpec(name, path)
    for entry in file.datasets:
        entries[entry.name] = DatasetSpec(
            entry.name, entry.prompts, entry.max_tokens, entry.max_samples, entry.weight
        )
    if not entries:
        raise EngineError("no datasets: give --prompts-dir DIR, or --config FILE with [[datasets]]")

    def first(*values: int | None) -> int | None:
        return next((value for value in values if value is not None), None)

    return [
        DatasetSpec(
            name,
            entries[name].prompts,
            first(
                flags.get("max_tokens"), entries[name].max_tokens, run.get("max_tokens_per_dataset")
            ),
            first(flags.get("max_samples"), entries[name].max_samples, run.get("max_samples")),
            entries[name].weight,
        )
        for name in _select(entries, flags.get("datasets"))
    ]


def merge_run(file: FileConfig, flags: Mapping[str, Any]) -> EngineConfig:
    """The run `file` describes with `flags` over it (None: not given); the defaults are
    :class:`EngineConfig`'s own. Raise :class:`EngineError` with a line for the user."""
    values: dict[str, Any] = {}
    for spelled in settings_of(EngineConfig):
        value = flags.get(spelled.name)
        if value is None:
            value = file.run.get(spelled.setting.key)
        if value is not None:
            values[spelled.name] = value
    sampling = dict(file.sampling)
    sampling.update({name: flags[name] for name in SAMPLING_FLAGS if flags.get(name) is not None})
    if sampling.get("max_new_tokens", 1) < 1:
        raise EngineError("--max-new-tokens must be at least 1")
    config = EngineConfig(datasets=_datasets(file, flags), sampling=sampling, **values)
    # Checked last: a wrong value (--concurrency 0) or a missing prompt folder is the
    # first thing to fix, and the message for it must not hide behind this one.
    if not config.tokenizer and config.api == "sglang":
        raise EngineError("no tokenizer: give --tokenizer DIR (the served model's tokenizer)")
    return config


def find_config(cwd: Path | None = None) -> Path | None:
    """The config a bare `gen-tui` (and `gen-tui alert`) reads when none is named:
    `./gen-tui.toml`, then the one in the user's config folder; None if neither is a file."""
    from platformdirs import user_config_dir

    for candidate in (
        (cwd or Path.cwd()) / "gen-tui.toml",
        Path(user_config_dir("gen-tui")) / "gen-tui.toml",
    ):
        if candidate.is_file():
            return candidate
    return None
