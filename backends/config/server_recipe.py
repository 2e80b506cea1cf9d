"""Server recipes: the `[[servers]]` and `[router]` tables of gen-tui.toml, as typed values.

A recipe says how to start one server (its argv, environment, port and log) and how to keep
it alive (where it answers its health check, how long loading may take, how often it may be
restarted). The config file (`backends/config/file.py`) owns reading the file and calls
:func:`parse_servers` and :func:`parse_router` here; the launchers and the supervisor take
the values. A recipe that cannot be used raises :class:`RecipeError`, one line naming the
recipe and the field, so a typo costs a line and never a traceback or a restart loop.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gen_tui.backends.config.slurm_names import job_name, slurm_time
from gen_tui.backends.untrusted import one_line

LOCAL = "local"
"""The `host` of a server on this machine (the default)."""
LAUNCHERS = ("process", "slurm")
DEFAULT_HEALTH = "/health"
DEFAULT_STARTUP_S = 600.0
"""Loading weights can take minutes: how long a start may go without its log growing
before it counts as hung (each new log line moves the deadline on)."""
DEFAULT_UNHEALTHY_S = 30.0
"""How long a running server may fail its health check before it is restarted."""
DEFAULT_DRAIN_S = 30.0
"""How long a server being stopped (or restarted by hand) may finish its in-flight requests,
off the router's list, before its SIGTERM."""
DEFAULT_MAX_RESTARTS = 5
"""Restarts allowed in any hour; one more and the server stays down (and alerts)."""
DEFAULT_BACKOFF_S = 5.0
DEFAULT_BACKOFF_MAX_S = 300.0
ROUTER_NAME = "router"
WORKERS_WORD = "{workers}"
"""A word of the router's argv replaced by the workers' URLs (one word each)."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

ROUTER_KEYS = frozenset(
    {"name", "host", "argv", "env", "port", "address", "log", "cwd", "health", "startup_s"}
    | {"unhealthy_s", "max_restarts_per_hour", "backoff_s", "backoff_max_s", "drain_s"}
)
SERVER_KEYS = ROUTER_KEYS | {"launcher", "slurm"}
SLURM_KEYS = ("partition", "gpus", "time")
"""The keys of `[servers.slurm]`: what sbatch is asked for (--partition, --gres, --time)."""


class RecipeError(ValueError):
    """A recipe that cannot be used: one line naming the recipe and the field."""


@dataclass(frozen=True)
class RestartPolicy:
    """How a server that died comes back: after `backoff_s`, doubled on each restart within
    the hour up to `backoff_max_s`, at most `max_per_hour` times an hour (then down)."""

    max_per_hour: int = DEFAULT_MAX_RESTARTS
    backoff_s: float = DEFAULT_BACKOFF_S
    backoff_max_s: float = DEFAULT_BACKOFF_MAX_S

    def delay(self, recent: int) -> float:
        """The wait before a restart when `recent` restarts happened in the last hour."""
        return float(min(self.backoff_max_s, self.backoff_s * (2 ** max(recent, 0))))


@dataclass(frozen=True)
class ServerRecipe:
    """One `[[servers]]` entry (or the `[router]`): how to start a server and keep it up."""

    name: str
    argv: tuple[str, ...]
    port: int
    host: str = LOCAL
    """"local" or the name of a `[[hosts]]` entry the server runs on (for a Slurm job:
    where sbatch, squeue and scancel run, the login node)."""
    launcher: Literal["process", "slurm"] = "process"
    env: tuple[tuple[str, str], ...] = ()
    address: str | None = None
    """Where clients reach it (default 127.0.0.1 on this machine, else the host's address)."""
    log: str | None = None
    """Its log file on its host (default: `<name>.log` in the servers folder)."""
    cwd: str | None = None
    health: str = DEFAULT_HEALTH
    startup_s: float = DEFAULT_STARTUP_S
    unhealthy_s: float = DEFAULT_UNHEALTHY_S
    drain_s: float = DEFAULT_DRAIN_S
    """The drain before a stop on purpose (see DEFAULT_DRAIN_S)."""
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    slurm: tuple[tuple[str, Any], ...] = ()
    """`[servers.slurm]`, checked: the Slurm launcher's own keys (partition, gpus, time)."""

    def url(self, address: str | None = None) -> str:
        """The base URL runs and the router send to: http://address:port."""
        where = self.address or address or "127.0.0.1"
        return f"http://{where}:{self.port}"

    @property
    def environment(self) -> dict[str, str]:
        return dict(self.env)


def _where(index: int, table: Mapping[str, Any], array: str) -> str:
    name = table.get("name")
    shown = f" {one_line(repr(name), 60)}" if isinstance(name, str) and name else ""
    return f"{array}[{index}]{shown}" if array != ROUTER_NAME else f"[{ROUTER_NAME}]"


def _number(table: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise RecipeError(f"{where}: {key} must be a number of seconds, 0 or more")
    return float(value)


def _recipe(
    table: object, where: str, hosts: Sequence[str], keys: frozenset[str], name: str | None
) -> ServerRecipe:
    if not isinstance(table, dict):
        raise RecipeError(f"{where} must be a table")
    unknown = sorted(set(table) - keys)
    if unknown:
        raise RecipeError(
            f"{where}: unknown key {one_line(unknown[0], 60)!r} (known: {', '.join(sorted(keys))})"
        )
    name = table.get("name", name)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise RecipeError(f"{where}: name must be letters, digits, '.', '_', '-' (64 at most)")
    argv = table.get("argv")
    if (
        not isinstance(argv, list)
        or not argv
        or not all(isinstance(word, str) and word and "\0" not in word for word in argv)
    ):
        raise RecipeError(f"{where}: argv must be a non-empty list of strings (the command)")
    port = table.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise RecipeError(f"{where}: port must be a whole number from 1 to 65535")
    host = table.get("host", LOCAL)
    if not isinstance(host, str) or (host != LOCAL and host not in hosts):
        known = ", ".join([LOCAL, *hosts])
        raise RecipeError(f"{where}: host must be {known!s} (a [[hosts]] name), not {host!r}")
    launcher = table.get("launcher", "process")
    if launcher not in LAUNCHERS:
        raise RecipeError(f"{where}: launcher must be one of {', '.join(LAUNCHERS)}")
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(key, str) and _ENV_NAME.fullmatch(key) and isinstance(value, str)
        for key, value in env.items()
    ):
        raise RecipeError(f'{where}: env must be a table of NAME = "value" strings')
    texts: dict[str, str | None] = {}
    for key in ("address", "log", "cwd", "health"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value or "\0" in value):
            raise RecipeError(f"{where}: {key} must be a non-empty string")
        texts[key] = value
    health = texts["health"] or DEFAULT_HEALTH
    if not health.startswith("/"):
        raise RecipeError(f"{where}: health must be a path starting with / (like /health)")
    restarts = table.get("max_restarts_per_hour", DEFAULT_MAX_RESTARTS)
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise RecipeError(f"{where}: max_restarts_per_hour must be a whole number, 0 or more")
    slurm = _slurm(table.get("slurm", {}), where)
    return ServerRecipe(
        name=name,
        argv=tuple(argv),
        port=port,
        host=host,
        launcher=launcher,
        env=tuple(env.items()),
        address=texts["address"],
        log=texts["log"],
        cwd=texts["cwd"],
        health=health,
        startup_s=_number(table, "startup_s", DEFAULT_STARTUP_S, where),
        unhealthy_s=_number(table, "unhealthy_s", DEFAULT_UNHEALTHY_S, where),
        drain_s=_number(table, "drain_s", DEFAULT_DRAIN_S, where),
        restart=RestartPolicy(
            restarts,
            _number(table, "backoff_s", DEFAULT_BACKOFF_S, where),
            _number(table, "backoff_max_s", DEFAULT_BACKOFF_MAX_S, where),
        ),
        slurm=tuple(slurm.items()),
    )


def _slurm(slurm: object, where: str) -> dict[str, Any]:
    """`[servers.slurm]`, checked here so that a typo is one line before anything is
    submitted (sbatch would refuse it later, once per restart)."""
    if not isinstance(slurm, dict):
        raise RecipeError(f"{where}: slurm must be a table ({', '.join(SLURM_KEYS)})")
    unknown = sorted(set(slurm) - set(SLURM_KEYS))
    if unknown:
        raise RecipeError(
            f"{where}: unknown slurm key {one_line(unknown[0], 60)!r} "
            f"(known: {', '.join(SLURM_KEYS)})"
        )
    partition = slurm.get("partition")
    if partition is not None and (not isinstance(partition, str) or not _NAME.fullmatch(partition)):
        raise RecipeError(f"{where}: slurm.partition must be a partition's name")
    gpus = slurm.get("gpus", 0)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise RecipeError(f"{where}: slurm.gpus must be a whole number, 0 or more")
    time = slurm.get("time")
    if time is not None and (not isinstance(time, str) or not slurm_time(time)):
        raise RecipeError(
            f"{where}: slurm.time must be a Slurm time limit as a string (minutes, "
            '"H:MM:SS", "D-HH:MM:SS" or "UNLIMITED")'
        )
    return slurm


def parse_servers(tables: object, hosts: Sequence[str] = ()) -> list[ServerRecipe]:
    """The `[[servers]]` array as recipes; `hosts` are the `[[hosts]]` names."""
    if not isinstance(tables, list):
        raise RecipeError("servers must be an array of tables ([[servers]])")
    out: list[ServerRecipe] = []
    for index, table in enumerate(tables):
        where = _where(index, table if isinstance(table, dict) else {}, "servers")
        recipe = _recipe(table, where, hosts, frozenset(SERVER_KEYS), None)
        if any(seen.name == recipe.name for seen in out) or recipe.name == ROUTER_NAME:
            raise RecipeError(f"{where}: name {recipe.name!r} is taken (each server's is its own)")
        if recipe.launcher == "slurm" and any(
            seen.launcher == "slurm" and job_name(seen.name) == job_name(recipe.name)
            for seen in out
        ):  # the job name is how a later gen-tui finds the server again (adopt)
            raise RecipeError(
                f"{where}: its Slurm job name {job_name(recipe.name)!r} is another server's"
            )
        if any((seen.host, seen.port) == (recipe.host, recipe.port) for seen in out):
            raise RecipeError(f"{where}: port {recipe.port} on {recipe.host} is another's")
        out.append(recipe)
    return out


def parse_router(table: object, hosts: Sequence[str] = ()) -> ServerRecipe | None:
    """The `[router]` table as a recipe (None when absent); its workers are the servers."""
    if table is None:
        return None
    return _recipe(table, f"[{ROUTER_NAME}]", hosts, ROUTER_KEYS, ROUTER_NAME)


def router_argv(router: ServerRecipe, worker_urls: Sequence[str]) -> list[str]:
    """The router's command with `{workers}` replaced by the workers' URLs."""
    out: list[str] = []
    for word in router.argv:
        out.extend(worker_urls if word == WORKERS_WORD else [word])
    return out
