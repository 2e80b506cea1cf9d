"""A supervised server as the panel's servers view shows it: one row of plain values, and
its state in words ("loading for 42 s", "unhealthy since 03:12", "exited: SIGKILL",
"restarting in 4 s", "down after 3 restarts").

The row is taken in the supervisors' own thread (a restart count is a state-file read, a
last log line may be an SSH round trip) and read by the UI as a whole value, never a
supervisor's attributes one by one. The words are computed at draw time from `since`, so
"loading for N s" counts up between events.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.untrusted import one_line

_KILLED = re.compile(r"killed by (\S+?)[;,]")
_CODE = re.compile(r"exited with code (-?\d+)")
_DELAY = re.compile(r"^in ([0-9.]+) s")


@dataclass(frozen=True)
class Holder:
    """The process listening on a port (a server not ours): `foreign.holder_of` finds it."""

    pid: int
    user: str
    """Its owner's login name ("?" when it cannot be read)."""
    command: str
    """Its command line, one line, bounded (another user's text: data)."""


@dataclass(frozen=True)
class ServerRow:
    """One server, its supervisor's state and what the view lists of it."""

    name: str
    url: str
    host: str
    state: ServerState
    since: float
    """Wall-clock time the state began."""
    detail: str
    """The event's line (the supervisor's words), untrusted in part: shown as data."""
    ref: str | None
    """Its pid or job id, while it has one."""
    started_at: float | None
    """When the running server started (for its uptime)."""
    restarts: int
    """Restarts in the last hour (the state file's: kept across panels)."""
    last_line: str
    """Its log's last line, one line, bounded."""
    argv: tuple[str, ...]
    """The command it was (or will be) started with."""
    port: int
    holder: Holder | None = None
    """For a server not ours: who holds its port (None: not known)."""
    last_exit: str = ""
    """How it last exited (the event's line), until it is healthy again: a restarting
    server's row says why it restarts."""
    gpus: str = "-"
    """The GPUs its recipe gives it, as :func:`gpus_of` says them."""


TP_FLAGS = ("--tp", "--tp-size", "--tensor-parallel-size")
"""SGLang's and vLLM's tensor-parallel flags: the GPUs a server takes without a device list."""


def gpus_of(recipe: ServerRecipe) -> str:
    """The GPUs `recipe` gives its server, as the view says them: its CUDA_VISIBLE_DEVICES
    ("0,1"), else its Slurm job's GPUs ("4 (gres)"), else its tensor parallelism ("8"),
    else "-" (not said: the server's own default)."""
    devices = recipe.environment.get("CUDA_VISIBLE_DEVICES")
    if devices is not None:
        return one_line(devices, 32) or "none"
    gpus = dict(recipe.slurm).get("gpus")
    if isinstance(gpus, int) and gpus > 0:
        return f"{gpus} (gres)"
    argv = list(recipe.argv)
    for index, word in enumerate(argv):
        for flag in TP_FLAGS:
            if word == flag and index + 1 < len(argv):
                value = argv[index + 1]
            elif word.startswith(flag + "="):
                value = word.split("=", 1)[1]
            else:
                continue
            if value.isdigit():
                return value
    return "-"


def state_words(row: ServerRow, now: float | None = None) -> str:
    """The row's state as the view says it (`now`: wall-clock time, for the counters)."""
    now = time.time() if now is None else now
    state, detail = row.state, row.detail
    if state in (ServerState.STARTING, ServerState.LOADING):
        return f"{state} for {max(now - row.since, 0):.0f} s"
    if state is ServerState.UNHEALTHY:
        return f"unhealthy since {time.strftime('%H:%M', time.localtime(row.since))}"
    if state is ServerState.EXITED:
        return exit_words(detail)
    if state is ServerState.RESTARTING:
        said = _countdown(row, now)
        return f"{said} ({exit_words(row.last_exit)})" if row.last_exit else said
    if state is ServerState.DOWN:
        return f"down after {row.restarts} restarts"
    return str(state)


def strip_words(row: ServerRow, now: float | None = None) -> str:
    """The row's state as the strip under the header says it: the state's word, and for a
    restart its countdown ("restarting in 12 s": the word alone left one guessing whether
    anything would happen), counted from `now` (wall-clock time) at each draw."""
    if row.state is ServerState.RESTARTING:
        return _countdown(row, time.time() if now is None else now)
    return str(row.state)


def _countdown(row: ServerRow, now: float) -> str:
    """The words "restarting in N s", from the supervisor's RESTARTING line ("in 12 s (restart 1
    ...)") and when it began; "restarting" when the line does not say."""
    delay = _DELAY.match(row.detail)
    if delay is None:
        return "restarting"
    left = max(row.since + float(delay.group(1)) - now, 0.0)
    return f"restarting in {math.ceil(left)} s"


def exit_words(detail: str) -> str:
    """An exit event's line in two words: "exited: SIGKILL", "exited: code 1", "exited"."""
    if (killed := _KILLED.search(detail)) is not None:
        return f"exited: {killed.group(1)}"
    if (code := _CODE.search(detail)) is not None:
        return f"exited: code {code.group(1)}"
    return "exited"


def uptime(row: ServerRow, now: float | None = None) -> str:
    """How long its server has run ("-" when none runs): `4m05s`, `2h13m`."""
    if row.started_at is None or row.ref is None:
        return "-"
    seconds = max(int((time.time() if now is None else now) - row.started_at), 0)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def ref_text(row: ServerRow) -> str:
    """Its pid or job id; a server not ours: the pid holding its port, if seen."""
    if row.state is ServerState.NOT_OURS:
        return f"pid {row.holder.pid}" if row.holder is not None else "pid ?"
    return row.ref or "-"
