"""The run configuration file (TOML) and its merge with command-line flags.

A config names the server, tokenizer, sampling settings and the datasets with their
budgets. Paths in it are relative to the file. Unknown keys are errors, because a
misspelt budget that is silently ignored is how a dataset runs 2.6x over.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gen_tui.backends.alerts import AlertConfig, AlertConfigError
from gen_tui.backends.config.run import (
    DatasetDefaults,
    DatasetSpec,
    EngineConfig,
    EngineError,
    Sampling,
)
from gen_tui.backends.config.server_recipe import (
    LOCAL,
    RecipeError,
    ServerRecipe,
    parse_router,
    parse_servers,
)
from gen_tui.backends.config.trust import read_trusted
from gen_tui.backends.settings import (
    DEFAULT_THEME,
    SettingError,
    read_table,
    setting,
    settings_of,
)
from gen_tui.backends.store.prompts import DatasetNameError, check_dataset_name, discover_datasets
from gen_tui.backends.telemetry.server_url import MAX_HOST_SERVERS, plain_url
from gen_tui.backends.untrusted import one_line

TABLES = ("run", "sampling", "datasets", "hosts", "alerts", "panel", "keys", "servers", "router")


class ConfigError(Exception):
    """A config file that cannot be used; the message names the file and the key."""


@dataclass
class HostEntry:
    """A machine whose generation runs gen-tui watches and controls (`[[hosts]]`).

    `target` is an ~/.ssh/config alias or user@host[:port]; "local" (or no target) means
    this machine. `command` is the run template gen-tui appends quoted flags to.
    """

    name: str = setting(key="name", kinds=(str,))
    output_dir: str = setting(key="output_dir", kinds=(str,))
    target: str | None = setting(None, key="target", kinds=(str,))
    pattern: str | None = setting(None, key="pattern", kinds=(str,))
    command: list[str] | None = setting(None, key="command", kinds=(list,))
    servers: tuple[str, ...] = setting((), key="servers", kinds=(list,))
    """Servers whose /metrics the watcher reads on the host, beside those its runs' command
    lines name: a run started by a script that takes its URL from elsewhere still shows."""


@dataclass(frozen=True)
class PanelSettings:
    """`[panel]` and `[keys]`: how the control panel looks and which keys it answers to.

    Why in the file: power users bring habits from vim, lazygit and k9s, and a terminal
    that cannot show colours needs a plainer theme; flags for these would be typed at every
    launch. Which ids and themes exist is the app's to check (backends know no Textual)."""

    theme: str = setting(DEFAULT_THEME, key="theme", kinds=(str,))
    """One of Textual's built-in themes (`ctrl+p` → Theme tries them live)."""
    vim: bool = setting(False, key="vim", kinds=(bool,))
    """h j k l move the selection; kill, history and the run list move to x, H and g."""
    keys: tuple[tuple[str, str], ...] = ()
    """`[keys]`: binding id → key(s), as written (comma-separated keys allowed)."""


@dataclass
class FileConfig:
    """A config file, read and checked: each table as the settings it gives (by field
    name); what it leaves out is the defaults' (the fields') or the flags'."""

    path: Path
    run: dict[str, Any] = field(default_factory=dict)
    """The `EngineConfig` settings `[run]` gives."""
    defaults: DatasetDefaults = field(default_factory=DatasetDefaults)
    """What `[run]` says of every dataset: the prompt folder and the budgets."""
    sampling: dict[str, Any] = field(default_factory=dict)
    """The `[sampling]` keys given (see :class:`Sampling`)."""
    datasets: list[DatasetSpec] = field(default_factory=list)
    hosts: list[HostEntry] = field(default_factory=list)
    alerts: AlertConfig = field(default_factory=AlertConfig)
    panel: PanelSettings = field(default_factory=PanelSettings)
    servers: list[ServerRecipe] = field(default_factory=list)
    """`[[servers]]`: the servers gen-tui starts, watches and restarts (docs/servers.md)."""
    router: ServerRecipe | None = None
    """`[router]`: a router in front of the servers, started and watched like them."""
    nodes: dict[str, str] = field(default_factory=dict)
    """Recipe name -> the node its Slurm job runs on now (from the servers' state file; the
    app fills it in for a run): where a recipe without an `address` answers."""

    def server_url(self, recipe: ServerRecipe) -> str:
        """Where runs reach `recipe`'s server: its address, else (a Slurm job) the node it
        runs on, else its host's address, else loopback."""
        if recipe.address:
            return recipe.url()
        if recipe.launcher == "slurm" and recipe.name in self.nodes:
            return recipe.url(self.nodes[recipe.name])
        if recipe.host == LOCAL:
            return recipe.url()
        host = next((entry for entry in self.hosts if entry.name == recipe.host), None)
        return recipe.url(target_address(host.target) if host and host.target else None)

    def resolve_server(self, name_or_url: str) -> str:
        """A run's `--server-url`: a recipe's name (the router's or a server's) becomes its
        URL; anything else is left as written."""
        for recipe in [*self.servers, *([self.router] if self.router else [])]:
            if recipe.name == name_or_url:
                return self.server_url(recipe)
        return name_or_url


def target_address(target: str) -> str:
    """The machine of an SSH target (`user@host:port` or an alias): its host part."""
    address = target.rsplit("@", 1)[-1]
    if address.startswith("["):  # [::1]:22
        return address.split("]", 1)[0] + "]"
    return address.split(":", 1)[0] if address.count(":") == 1 else address


def _table(path: Path, table: object, where: str, *classes: type) -> tuple[dict[str, Any], ...]:
    """`read_table` with its error as a ConfigError naming the file."""
    try:
        return read_table(table, where, *classes)
    except SettingError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _paths(base: Path, cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """The path settings among `values`, made absolute against the config's folder."""
    for spelled in settings_of(cls):
        if spelled.setting.path and spelled.name in values:
            values[spelled.name] = (base / Path(values[spelled.name]).expanduser()).resolve()
    return values


def _array(path: Path, data: Mapping[str, Any], name: str) -> list[Any]:
    tables = data.get(name, [])
    if not isinstance(tables, list):
        raise ConfigError(f"{path}: {name} must be an array of tables ([[{name}]])")
    return tables


def _read(path: Path) -> dict[str, Any]:
    """The TOML tables of `path`, if it is the user's own file (someone else's, or one
    others may write, is refused); raise :class:`ConfigError` naming the file."""
    try:
        raw = read_trusted(path, "config")  # someone else's gen-tui.toml is refused
    except PermissionError as exc:
        if exc.strerror is not None:  # the system's EACCES, not our refusal
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def load_panel(path: Path) -> PanelSettings:
    """`[panel]` and `[keys]` of `path` alone, for `--demo` and `--host`, which run nothing
    the file describes: the user's theme, vim and remaps hold in every mode, and a run
    table being written (or one this version does not know) does not stop a demo. Raise
    :class:`ConfigError` naming the file and the key."""
    return _panel(path, _read(path))


def _panel(path: Path, data: Mapping[str, Any]) -> PanelSettings:
    (panel,) = _table(path, data.get("panel", {}), "panel", PanelSettings)
    return PanelSettings(**panel, keys=_keys(path, data.get("keys", {})))


def load_config(path: Path) -> FileConfig:
    """Read and validate `path`; raise :class:`ConfigError` naming what is wrong and where."""
    data = _read(path)
    unknown = set(data) - set(TABLES)
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ConfigError(f"{path}: unknown table(s) {names} (known: {', '.join(TABLES)})")
    base = path.parent
    run, defaults = _table(path, data.get("run", {}), "run", EngineConfig, DatasetDefaults)
    (sampling,) = _table(path, data.get("sampling", {}), "sampling", Sampling)
    config = FileConfig(
        path=path,
        run=_paths(base, EngineConfig, run),
        defaults=DatasetDefaults(**_paths(base, DatasetDefaults, defaults)),
        sampling=sampling,
    )
    price = config.run.get("price_per_million")
    if price is not None:
        if len(price) != 2 or not all(
            isinstance(p, int | float) and not isinstance(p, bool) and p >= 0 for p in price
        ):
            raise ConfigError(f"{path}: run.price_per_million must be [input, output] dollars")
        config.run["price_per_million"] = (float(price[0]), float(price[1]))
    if "tokenizer" in config.run:  # a folder beside the config, else a name as given
        candidate = base / Path(config.run["tokenizer"]).expanduser()
        if candidate.exists():
            config.run["tokenizer"] = str(candidate.resolve())
    for index, entry in enumerate(_array(path, data, "datasets")):
        where = f"datasets[{index}]"
        (values,) = _table(path, entry, where, DatasetSpec)
        try:
            spec = DatasetSpec(**_paths(base, DatasetSpec, values))
        except (DatasetNameError, EngineError) as exc:
            raise ConfigError(f"{path}: {where}: {exc}") from None
        if any(seen.name == spec.name for seen in config.datasets):
            raise ConfigError(f"{path}: dataset {spec.name!r} is listed twice")
        config.datasets.append(spec)
    config.hosts = _hosts(path, _array(path, data, "hosts"))
    alerts = data.get("alerts", {})
    if not isinstance(alerts, dict):
        raise ConfigError(f"{path}: [alerts] must be a table")
    try:
        config.alerts = AlertConfig.parse(alerts)
    except AlertConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    host_names = [host.name for host in config.hosts]
    try:
        config.servers = parse_servers(data.get("servers", []), host_names)
        config.router = parse_router(data.get("router"), host_names)
    except RecipeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    config.panel = _panel(path, data)
    return config


def _keys(path: Path, table: object) -> tuple[tuple[str, str], ...]:
    """`[keys]`: each binding id with its key(s), a string or a list of strings. Whether
    the ids exist and the keys are free is checked by the app, which knows its bindings."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [keys] must be a table of binding id = key")
    out: list[tuple[str, str]] = []
    for name, keys in table.items():
        if isinstance(keys, list) and keys and all(isinstance(key, str) for key in keys):
            keys = ",".join(keys)
        if not isinstance(keys, str) or not all(
            key.strip() and key.strip().isprintable() and " " not in key.strip()
            for key in keys.split(",")
        ):
            raise ConfigError(
                f'{path}: keys.{one_line(name, 60)} must be a key like "x", "K" or '
                '"ctrl+k" (or a list of them)'
            )
        out.append((name, ",".join(key.strip() for key in keys.split(","))))
    return tuple(out)


def _hosts(path: Path, hosts: list[Any]) -> list[HostEntry]:
    out: list[HostEntry] = []
    for index, entry in enumerate(hosts):
        where = f"hosts[{index}]"
        (values,) = _table(path, entry, where, HostEntry)
        try:
            check_dataset_name(values["name"])
        except DatasetNameError:
            raise ConfigError(
                f"{path}: {where}.name {values['name']!r}: use letters, digits, '.', '_', '-'"
            ) from None
        command = values.get("command")
        if command is not None and (not command or not all(isinstance(w, str) for w in command)):
            raise ConfigError(f"{path}: {where}.command must be a non-empty list of strings")
        if values.get("target") in ("", "local"):
            values["target"] = None
        values["servers"] = _servers(path, where, values.get("servers", []))
        out.append(HostEntry(**values))
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


def _select(available: dict[str, Any], wanted: str | None) -> list[str]:
    if not wanted:
        return list(available)
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    unknown = [name for name in names if name not in available]
    if unknown:
        known = ", ".join(available) or "none"
        raise EngineError(f"unknown dataset(s) {', '.join(unknown)} (known: {known})")
    return names


def _given(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of `cls` among `values` (flags by field name; None: not given)."""
    return {
        spelled.name: values[spelled.name]
        for spelled in settings_of(cls)
        if values.get(spelled.name) is not None
    }


def _first(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def _datasets(file: FileConfig, flagged: DatasetDefaults, wanted: str | None) -> list[DatasetSpec]:
    """The selected datasets, each with its budget: the flag's, else its own, else `[run]`'s."""
    entries: dict[str, DatasetSpec] = {}
    prompts_dir = _first(flagged.prompts_dir, file.defaults.prompts_dir)
    if prompts_dir is not None:
        prompts_dir = Path(prompts_dir)
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
        entries[entry.name] = entry
    if not entries:
        raise EngineError("no datasets: give --prompts-dir DIR, or --config FILE with [[datasets]]")
    return [
        replace(
            entries[name],
            max_tokens=_first(
                flagged.max_tokens, entries[name].max_tokens, file.defaults.max_tokens
            ),
            max_samples=_first(
                flagged.max_samples, entries[name].max_samples, file.defaults.max_samples
            ),
        )
        for name in _select(entries, wanted)
    ]


def merge_run(file: FileConfig, flags: Mapping[str, Any]) -> EngineConfig:
    """The run `file` describes with `flags` over it (by field name; None: not given); the
    defaults are the settings' own. Raise :class:`EngineError` with a line for the user."""
    values = file.run | _given(EngineConfig, flags)
    if values.get("server_urls"):  # a recipe's name stands for its server's URL
        values["server_urls"] = [file.resolve_server(url) for url in values["server_urls"]]
    sampling = file.sampling | _given(Sampling, flags)
    try:
        Sampling(**sampling)
    except SettingError as exc:
        raise EngineError(str(exc)) from None
    datasets = _datasets(
        file, DatasetDefaults(**_given(DatasetDefaults, flags)), flags.get("datasets")
    )
    config = EngineConfig(datasets=datasets, sampling=sampling, **values)
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
