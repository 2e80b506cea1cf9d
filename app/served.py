"""The panel's servers: the config's `[[servers]]` supervised in a worker thread of their
own, as `gen-tui servers up` supervises them, with the UI told through messages.

Why a thread with its own loop: the supervisors check processes, read logs and state files
and call health URLs (over SSH for a `[[hosts]]` server); none of that may run on Textual's
loop. The thread runs a :class:`Fleet`, which adopts what an earlier gen-tui started (the
servers are detached and outlive the panel) before starting the rest. Each event goes up
as a :class:`ServerChanged`; the view reads :attr:`PanelServers.rows`, a whole value
replaced once a second. Commands go down as coroutines on the thread's loop
(`run_coroutine_threadsafe`), and a command's outcome comes back as a :class:`ServerSaid`.
Quitting leaves the servers running (:meth:`leave`): the next panel adopts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message
from textual.notifications import SeverityLevel

from gen_tui.backends.aio import within
from gen_tui.backends.config.server_recipe import LOCAL
from gen_tui.backends.servers.events import ServerEvent, ServerState
from gen_tui.backends.servers.view import Holder, ServerRow, gpus_of, strip_words
from gen_tui.backends.store.tails import Tail
from gen_tui.backends.untrusted import one_line

if TYPE_CHECKING:  # aiohttp, asyncssh and psutil load in the servers' thread, not at startup
    import aiohttp

    from gen_tui.backends.config.file import FileConfig
    from gen_tui.backends.servers.fleet import Fleet
    from gen_tui.backends.servers.setup import ServerSetup
    from gen_tui.backends.servers.supervisor import ServerSupervisor

ROWS_S = 1.0
"""How often the rows (restarts, last log line) are taken again."""
LOG_WAIT_S = 15.0
"""How long `L`'s read of a server's log may take (an SSH round trip)."""
RUNNING = (
    ServerState.STARTING,
    ServerState.LOADING,
    ServerState.HEALTHY,
    ServerState.UNHEALTHY,
    ServerState.EXITED,
    ServerState.RESTARTING,
)
"""States in which the supervisor is at work on the server (start does nothing then)."""


class ServerChanged(Message):
    """A supervised server's event (the servers' thread -> UI)."""

    def __init__(self, event: ServerEvent) -> None:
        super().__init__()
        self.event = event


class ServerSaid(Message):
    """The outcome of a command on a server, or why the servers could not be supervised."""

    def __init__(self, severity: SeverityLevel, text: str) -> None:
        super().__init__()
        self.severity = severity
        self.text = text


class PanelServers:
    """The config's servers, supervised in :meth:`run` (call it in a thread worker)."""

    def __init__(
        self,
        config: FileConfig,
        post: Callable[[Message], object],
        *,
        folder: Path | None = None,
        check_s: float | None = None,
        grace_s: float | None = None,
    ) -> None:
        """`post`: the app's `post_message` (thread-safe); `folder`: the state file's (the
        user's state folder by default); `check_s`, `grace_s`: the supervisor's defaults
        when None."""
        self.config = config
        self.post = post
        self.folder = folder
        self.check_s = check_s
        self.grace_s = grace_s
        self.names = [
            r.name for r in (*config.servers, *([config.router] if config.router else []))
        ]
        self.rows: tuple[ServerRow, ...] = ()
        """The servers as the view lists them (replaced whole, once a second)."""
        self.problem = ""
        """Why the servers are not supervised (a launcher not wired, a failed setup)."""
        self.ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._quit: asyncio.Event | None = None
        self._fleet: Fleet | None = None
        self._setup: ServerSetup | None = None
        self._holders: dict[str, Holder | None] = {}
        self._pending: set[asyncio.Future[None]] = set()
        self._last_lines: dict[str, tuple[str, str]] = {}
        """Each server's pid or job and its last log line worth showing, by name."""
        self._exits: dict[str, str] = {}
        """Each server's last exit, until it is healthy again (said while it restarts)."""

    @property
    def supervised(self) -> dict[str, str]:
        """URL -> the server's name and state in words, for the strip under the header: a
        restart's countdown counted at each read (the strip is drawn every second), from
        the rows (one whole value: no supervisor read on the UI's loop)."""
        return {row.url: f"{row.name}: {strip_words(row)}" for row in self.rows}

    # the thread

    def run(self) -> None:
        """Supervise until :meth:`leave` (blocks: a worker thread's body)."""
        asyncio.run(self._main())

    async def _main(self) -> None:
        import aiohttp

        from gen_tui.backends.servers.setup import ServerSetup

        self._loop = asyncio.get_running_loop()
        self._quit = asyncio.Event()
        try:
            async with aiohttp.ClientSession() as session:
                setup = self._setup = ServerSetup(self.config, self.folder)
                try:
                    await self._supervise(setup, session)
                finally:
                    await setup.close()
        except Exception as exc:  # one line on the panel, never a traceback
            self._fail(f"the servers are not supervised: {type(exc).__name__}: {exc}")
        finally:
            self.ready.set()

    def _fail(self, line: str) -> None:
        self.problem = one_line(line, 500)
        self.post(ServerSaid("error", self.problem))

    async def _supervise(self, setup: ServerSetup, session: aiohttp.ClientSession) -> None:
        from gen_tui.backends.servers.fleet import Fleet
        from gen_tui.backends.servers.supervisor import CHECK_S, STOP_GRACE_S

        problem = setup.unsupported()
        if problem is not None:
            self._fail(problem)
            return
        fleet = self._fleet = Fleet(
            self.config.servers,
            setup.urls,
            setup.launchers,
            setup.state,
            session,
            [self._event],
            router=self.config.router,
            check_s=CHECK_S if self.check_s is None else self.check_s,
            grace_s=STOP_GRACE_S if self.grace_s is None else self.grace_s,
        )
        await fleet.up()
        assert self._quit is not None
        try:
            while not self._quit.is_set():
                await self._take_rows()
                self.ready.set()
                with contextlib.suppress(TimeoutError):
                    await within(self._quit.wait(), ROWS_S)
        finally:
            await fleet.leave()

    def _event(self, event: ServerEvent) -> None:
        """An event (on the servers' loop): told to the UI, and the rows taken again at
        once, so that the view shows each state however briefly it lasts."""
        if event.state is ServerState.EXITED:
            self._exits[event.name] = event.detail
        elif event.state in (ServerState.HEALTHY, ServerState.STOPPED):
            self._exits.pop(event.name, None)
        self.post(ServerChanged(event))
        if self._fleet is not None and self._fleet.supervisors:
            task = asyncio.ensure_future(self._take_rows())
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _take_rows(self) -> None:
        fleet, setup = self._fleet, self._setup
        if fleet is None or setup is None:
            return
        rows = []
        for name in self.names:
            supervisor = fleet.supervisors.get(name)
            if supervisor is None:
                continue
            rows.append(await self._row(supervisor, setup))
        self.rows = tuple(rows)

    async def _row(self, supervisor: ServerSupervisor, setup: ServerSetup) -> ServerRow:
        recipe, launched = supervisor.recipe, supervisor.launched
        last = ""
        if launched is not None:
            with contextlib.suppress(Exception):  # a lost link: the line is a courtesy
                last = await supervisor.launcher.last_line(launched)
            # A tail of nothing but probes (process.PROBE_LINE): the line said before stays.
            ref, said = self._last_lines.get(recipe.name, ("", ""))
            if not last and ref == launched.ref:
                last = said
            self._last_lines[recipe.name] = (launched.ref, last)
        from gen_tui.backends.servers.foreign import holder_of

        holder = None
        if supervisor.state is ServerState.NOT_OURS and recipe.host == LOCAL:
            if recipe.name not in self._holders:
                self._holders[recipe.name] = await asyncio.to_thread(holder_of, recipe.port)
            holder = self._holders[recipe.name]
        else:
            self._holders.pop(recipe.name, None)
        return ServerRow(
            recipe.name,
            supervisor.base_url,  # a Slurm job without an address: on its node
            recipe.host,
            supervisor.state,
            supervisor.since,
            supervisor.detail,
            launched.ref if launched else None,
            launched.started_at if launched else None,
            await asyncio.to_thread(lambda: supervisor.restarts),
            one_line(last, 300),
            tuple(recipe.argv),
            recipe.port,
            holder,
            self._exits.get(recipe.name, ""),
            gpus_of(recipe),
        )

    # commands (from the UI thread; each runs on the servers' loop)

    def _submit(self, work: Callable[[], Coroutine[Any, Any, str]]) -> None:
        loop = self._loop
        if loop is None or self._fleet is None:
            self.post(ServerSaid("warning", "the servers are not up yet: try again in a moment"))
            return

        async def guarded() -> None:
            try:
                said = await work()
            except Exception as exc:  # said in one line, never a traceback on the panel
                self.post(ServerSaid("error", one_line(f"{type(exc).__name__}: {exc}", 500)))
                return
            if said:
                self.post(ServerSaid("information", one_line(said, 500)))

        asyncio.run_coroutine_threadsafe(guarded(), loop)

    def _supervisor(self, name: str) -> ServerSupervisor:
        assert self._fleet is not None
        return self._fleet.supervisors[name]

    def start(self, name: str) -> None:
        """Start `name`'s server (one that is stopped, failed, down or not ours)."""

        async def start() -> str:
            supervisor = self._supervisor(name)
            if supervisor.state in RUNNING:
                return f"server {name} is {supervisor.state}: nothing to start"
            supervisor.ever_healthy = supervisor.adopted = False
            supervisor.start()
            return ""

        self._submit(start)

    def stop(self, name: str) -> None:
        """Stop `name`'s server (SIGTERM, then SIGKILL after the grace): not restarted."""

        async def stop() -> str:
            return await self._supervisor(name).stop()

        self._submit(stop)

    def restart(self, name: str, argv: Sequence[str] | None = None) -> None:
        """Stop and start `name`'s server anew; with `argv`, started with that command (for
        this panel's supervision of it: the config file is unchanged). A server not ours
        is stopped first (the caller asked the user, naming its pid and owner)."""

        async def restart() -> str:
            supervisor = self._supervisor(name)
            if supervisor.state is ServerState.NOT_OURS:
                said = await self._stop_foreign(supervisor)
                if said is not None:
                    return said
            if argv is not None:
                supervisor.recipe = replace(supervisor.recipe, argv=tuple(argv))
            await supervisor.restart()
            return ""

        self._submit(restart)

    def save_flags(self, name: str, argv: Sequence[str]) -> None:
        """Save `argv` as `name`'s command in the config file (in a thread: a disk write),
        the rest of the file kept; the outcome comes back as a line."""

        async def save() -> str:
            from gen_tui.backends.config.file import ConfigError
            from gen_tui.backends.config.save import save_argv

            try:
                return await asyncio.to_thread(save_argv, self.config.path, name, argv)
            except ConfigError as exc:
                self.post(ServerSaid("error", one_line(str(exc), 500)))
                return ""

        self._submit(save)

    async def _stop_foreign(self, supervisor: ServerSupervisor) -> str | None:
        """Stop the process holding a not-ours server's port; a line when it cannot be."""
        from gen_tui.backends.servers.foreign import holder_of
        from gen_tui.backends.servers.supervisor import STOP_GRACE_S

        recipe = supervisor.recipe
        setup = self._setup
        if recipe.host != LOCAL or setup is None:
            return f"server {recipe.name}: not ours on {recipe.host}: stop it there first"
        holder = await asyncio.to_thread(holder_of, recipe.port)
        if holder is None:
            return f"server {recipe.name}: no process to be seen on port {recipe.port}"
        host = setup.hosts[LOCAL]
        identity = await host.identify(holder.pid)
        if identity is None:
            return f"server {recipe.name}: pid {holder.pid} has gone"
        grace = STOP_GRACE_S if self.grace_s is None else self.grace_s
        outcome = await host.kill(identity, grace, files=[])
        self._holders.pop(recipe.name, None)
        self.post(ServerSaid("information", f"server {recipe.name}: {outcome.detail}"))
        return None

    def holder(self, name: str) -> Holder | None:
        """Who holds a not-ours server's port, as last seen (None: not known)."""
        return self._holders.get(name)

    def log_tail(self, name: str, lines: int) -> Tail:
        """The end of `name`'s log (blocks: call it from a thread, as `L`'s screen does)."""
        loop = self._loop
        if loop is None or self._setup is None or self._fleet is None:
            return Tail(error="the servers are not up yet")
        future = asyncio.run_coroutine_threadsafe(self._log_tail(name, lines), loop)
        try:
            return future.result(LOG_WAIT_S)
        except Exception as exc:
            future.cancel()
            return Tail(error=one_line(f"{type(exc).__name__}: {exc}", 300))

    async def _log_tail(self, name: str, lines: int) -> Tail:
        """On the servers' loop: the log of the running server, else where its launcher
        (the one the supervisor was given by :class:`ServerSetup`) says it writes it."""
        setup = self._setup
        assert setup is not None
        supervisor = self._supervisor(name)
        launched, recipe = supervisor.launched, supervisor.recipe
        if launched is not None:
            host_name, path = launched.host, launched.log
        else:
            host_name, path = recipe.host, await supervisor.launcher.log_of(recipe)
        host = setup.hosts.get(host_name)
        if host is None:
            return Tail(error=f"server {name}: its log is not known")
        try:
            got = await host.log_lines(path, lines)
        except Exception as exc:
            return Tail(error=one_line(f"{type(exc).__name__}: {exc}", 300), path=path)
        return Tail(lines=tuple(got), path=path)

    def leave(self) -> None:
        """Stop supervising and leave every server running (the panel quits)."""
        loop, quit_ = self._loop, self._quit
        if loop is not None and quit_ is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(quit_.set)
