"""Server recipes for the tests of issue 32: `gen-tui sim` as the served program, started
through the real launchers and supervisor, and the cleanup that leaves no server behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import aiohttp
import psutil

from gen_tui.backends.config.server_recipe import RestartPolicy, ServerRecipe
from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.servers.events import ServerEvent, ServerState
from gen_tui.backends.servers.fleet import Fleet
from gen_tui.backends.servers.launcher import Exit, Launched, Launcher
from gen_tui.backends.servers.process import ProcessLauncher
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.servers.supervisor import ServerSupervisor
from tests.support.polling import wait_until
from tests.support.runs import ENV, GEN_TUI


def sim_recipe(name: str, port: int, *flags: str, **fields: object) -> ServerRecipe:
    """A recipe whose server is `gen-tui sim` on `port` (fast answers unless `flags` say)."""
    argv = (*GEN_TUI, "sim", "--port", str(port), "--tokens-per-s", "2000", *flags)
    values: dict[str, object] = {
        "startup_s": 30.0,
        "unhealthy_s": 5.0,
        "restart": RestartPolicy(3, 0.2, 1.0),
        "env": (("PYTHONUNBUFFERED", "1"),),
    }
    values.update(fields)
    return ServerRecipe(name, argv, port, **values)  # type: ignore[arg-type]


def launcher_in(folder: Path) -> ProcessLauncher:
    """A process launcher on this machine, its logs, start guard and state in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    return ProcessLauncher({"local": LocalHost(folder)}, str(folder), StateFile(folder))


def kill_servers(folder: Path) -> None:
    """SIGKILL every server the state file in `folder` names that still runs as started:
    the same pid started at the same time. Not by its command line: sglang-router retitles
    itself `sglang::router` (as the launcher's own `same_start` knows), and a check by
    command line left every router of these tests running after them."""
    for entry in StateFile(folder).read().values():
        launched = entry.launched
        if launched is None or launched.identity is None:
            continue
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            proc = psutil.Process(launched.identity.pid)
            if abs(proc.create_time() - launched.identity.start_time) < 1.0:
                os.killpg(launched.identity.pid, signal.SIGKILL)


def still_running(folder: Path) -> list[str]:
    """The servers of the state file in `folder` whose process still runs (as started)."""
    left = []
    for name, entry in StateFile(folder).read().items():
        launched = entry.launched
        if launched is None or launched.identity is None:
            continue
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(launched.identity.pid)
            if proc.status() != psutil.STATUS_ZOMBIE and (
                abs(proc.create_time() - launched.identity.start_time) < 1.0
            ):
                left.append(f"{name} (pid {launched.identity.pid})")
    return left


class Recorder:
    """An event sink that keeps every event, and waits for a state."""

    def __init__(self) -> None:
        self.events: list[ServerEvent] = []

    def __call__(self, event: ServerEvent) -> None:
        self.events.append(event)

    def states(self, name: str | None = None) -> list[ServerState]:
        return [e.state for e in self.events if name is None or e.name == name]

    def last(self, state: ServerState) -> ServerEvent:
        return next(e for e in reversed(self.events) if e.state is state)

    async def reach(self, state: ServerState, count: int = 1, timeout: float = 60) -> ServerEvent:
        """Wait until `state` has been reached `count` times; that event."""
        await wait_until(
            lambda: self.states().count(state) >= count,
            timeout,
            f"{state} x{count}",
            detail=lambda: "\n".join(e.line() for e in self.events),
        )
        return [e for e in self.events if e.state is state][count - 1]


def supervisor_of(
    recipe: ServerRecipe,
    folder: Path,
    session: aiohttp.ClientSession,
    recorder: Recorder,
    adopted: Launched | None = None,
) -> ServerSupervisor:
    launcher = launcher_in(folder)
    return ServerSupervisor(
        recipe,
        recipe.url(),
        launcher,
        launcher.state,
        session,
        [recorder],
        adopted=adopted,
        check_s=0.2,
        grace_s=3.0,
    )


class Lines:
    """A child's stdout, line by line, kept as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            self.lines.append(raw.decode().rstrip("\n"))

    def having(self, *words: str) -> list[str]:
        return [line for line in self.lines if all(word in line for word in words)]

    async def wait(self, *words: str, count: int = 1, timeout: float = 60) -> str:
        await wait_until(
            lambda: len(self.having(*words)) >= count,
            timeout,
            f"{words} x{count} in the output",
            detail=lambda: "\n".join(self.lines),
        )
        return self.having(*words)[count - 1]


async def gen_tui_in(state: Path, *args: str) -> asyncio.subprocess.Process:
    """`gen-tui ARGS` with `state` as its XDG_STATE_HOME (the servers' state file, logs)."""
    return await asyncio.create_subprocess_exec(
        *GEN_TUI,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**ENV, "XDG_STATE_HOME": str(state)},
        start_new_session=True,
    )


def routed_fleet(
    workers: list[ServerRecipe],
    router: ServerRecipe,
    folder: Path,
    http: aiohttp.ClientSession,
    *,
    check_s: float = 0.2,
    grace_s: float = 3.0,
) -> tuple[Fleet, Recorder, dict[str, str]]:
    """`workers` and `router` as one fleet of local processes supervised from `folder`,
    with a recorder of its events and each server's URL by name (not started yet)."""
    launcher = launcher_in(folder)
    recorder = Recorder()
    urls = {recipe.name: recipe.url() for recipe in [*workers, router]}
    fleet = Fleet(workers, urls, {"process": launcher}, launcher.state, http, [recorder],
                  router=router, check_s=check_s, grace_s=grace_s)  # fmt: skip
    return fleet, recorder, urls


class IdleLauncher(Launcher):
    """A launcher with nothing behind it: no exit, nothing to adopt, an empty log. A test's
    own launcher takes it as a base and says what its test needs (start, stop)."""

    async def start(self, recipe: ServerRecipe) -> Launched:
        raise AssertionError(f"{recipe.name}: nothing is started by this launcher")

    async def stop(self, launched: Launched, grace_s: float) -> str:
        return "stopped"

    async def exit_of(self, launched: Launched) -> Exit | None:
        return None

    async def adopt(self) -> list[Launched]:
        return []

    async def log_of(self, recipe: ServerRecipe) -> str:
        return "log"

    async def last_line(self, launched: Launched) -> str:
        return ""

    async def log_size(self, launched: Launched) -> int | None:
        return 0
