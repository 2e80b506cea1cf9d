"""Keeping one server alive: start it, wait for its health check, watch it, restart it.

The life of a server, as :class:`ServerState` says it: starting -> loading (its deadline
moves on while its log grows: loading weights can take minutes) -> healthy -> unhealthy
since T -> exited (code or signal) -> restarting in N s (backoff, doubled each time) ->
down (after K restarts in an hour: it stays down and alerts). A server that never came up
since gen-tui started it (a missing program, a port in use, a flag the server refuses) is
failed, with its own last log line, and never restarted: a restart loop would only repeat
the line. Something gen-tui did not start answering on the recipe's port is "not ours":
listed, never started over nor restarted. Each change is a :class:`ServerEvent` to every
sink (the panel, `gen-tui servers up`, the alerts, the router's worker list).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
from collections.abc import Sequence

import aiohttp

from gen_tui.backends.aio import within
from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.servers.drain import drain_then_stop, tell_runs, untell_runs
from gen_tui.backends.servers.events import EventSink, ServerEvent, ServerState
from gen_tui.backends.servers.health import check_health
from gen_tui.backends.servers.launcher import Launched, Launcher, LaunchError
from gen_tui.backends.servers.router import RouterWorkers
from gen_tui.backends.servers.state import StateFile

CHECK_S = 1.0
"""How often a server's process and health are looked at."""
STOP_GRACE_S = 15.0
"""How long a stopped server may drain on SIGTERM before SIGKILL."""
START_TIMEOUT_S = 120.0
"""How long a launch itself may take (over SSH: connect, start, check the pid); past it
the start counts as failed. Not for a launcher that queues (a batch job waits its turn)."""
ENDED = (ServerState.FAILED, ServerState.DOWN, ServerState.STOPPED, ServerState.NOT_OURS)
"""The states the supervisor leaves a server in (until someone starts it again)."""


class ServerSupervisor:
    """Start, watch and restart the server of one recipe (see the module's docstring)."""

    def __init__(
        self,
        recipe: ServerRecipe,
        url: str,
        launcher: Launcher,
        state: StateFile,
        session: aiohttp.ClientSession,
        sinks: Sequence[EventSink] = (),
        *,
        kind: str = "process",
        adopted: Launched | None = None,
        check_s: float = CHECK_S,
        grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.recipe = recipe
        self.url = url.rstrip("/")
        self.launcher = launcher
        self.state_file = state
        self.session = session
        self.sinks = list(sinks)
        self.kind = kind
        self.last_ref: str | None = None
        """The ref (pid, job id) of the last process launched or adopted: an `exited`
        event comes after `launched` is cleared and still names what exited."""
        self.launched = adopted
        self.adopted = adopted is not None
        self._adopted_launch = adopted
        """The launch adopted at the start: its loading and healthy lines say so (not those of
        a restart after it)."""
        self.check_s = check_s
        self.grace_s = grace_s
        self.state = ServerState.STOPPED
        self.since = time.time()
        self.detail = ""
        self.ever_healthy = False
        self.restarted = False
        self.final = False
        """The last end was one not to restart (:attr:`Exit.final`)."""
        self.router: RouterWorkers | None = None
        """The router whose worker this server is (set by the :class:`Fleet`): a stop on
        purpose takes it off that list before the drain."""
        self._task: asyncio.Task[ServerState] | None = None
        self._noticed: Launched | None = None
        """The launch whose drain notice this supervisor wrote and has not removed: it goes
        once the server is healthy again, or stopped for good (a stop, a give-up)."""

    # what the views read

    @property
    def restarts(self) -> int:
        """Restarts in the last hour (kept across gen-tui sessions in the state file)."""
        return self.state_file.entry(self.recipe.name, self.kind).recent()

    @property
    def left(self) -> bool:
        """Whether its life here is over (failed, down, not ours, stopped): its task ended.
        Not its state alone: a supervisor not yet begun says "stopped" too."""
        return self._task is not None and self._task.done()

    @property
    def base_url(self) -> str:
        """Where the server answers now: a batch job without an `address` in its recipe
        answers on the node it runs on (known once it runs), anything else on `url`."""
        node = self.launched.node if self.launched else None
        if node and self.launcher.queues and not self.recipe.address:
            return f"http://{node}:{self.recipe.port}"
        return self.url

    @property
    def health_url(self) -> str:
        return self.base_url + self.recipe.health

    @property
    def launched(self) -> Launched | None:
        """The process (or job) this supervisor watches now; None between two."""
        return self._launched

    @launched.setter
    def launched(self, launched: Launched | None) -> None:
        self._launched = launched
        if launched is not None:
            self.last_ref = launched.ref

    def _ended_ref(self, state: ServerState) -> str | None:
        ending = state in (ServerState.EXITED, ServerState.FAILED, ServerState.STOPPED)
        return self.last_ref if ending else None

    def _emit(self, state: ServerState, detail: str = "", since: float | None = None) -> None:
        now = time.time()
        self.state, self.detail, self.since = state, detail, since or now
        event = ServerEvent(
            self.recipe.name,
            state,
            now,
            detail,
            self.launched.ref if self.launched else self._ended_ref(state),
            self.restarts,
            self.since,
            self.base_url,
        )
        for sink in self.sinks:
            sink(event)

    # control

    def start(self) -> asyncio.Task[ServerState]:
        """Run the server's life in a task (adopting what the constructor was given)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"server {self.recipe.name}")
        return self._task

    async def wait(self) -> ServerState:
        assert self._task is not None
        return await self._task

    async def stop(
        self, grace_s: float | None = None, drain_s: float | None = None, for_good: bool = True
    ) -> str:
        """Stop watching and stop the server (if it is ours), drained first (off the
        router, its in-flight requests given `drain_s`, the recipe's by default; see
        drain.py): one line of what happened. Its runs' drain notice goes with a stop
        `for_good`; a stop before a restart keeps it until the server is healthy again."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.launched is None and self.launcher.queues:
            # A job stopped while it waits in the queue: noted at its submission, not yet
            # handed back by the launcher's start. Cancelled too, never left queued.
            entry = self.state_file.read().get(self.recipe.name)
            if entry is not None and entry.launcher == self.kind:
                self.launched = entry.launched
        if self.launched is None:
            if for_good:
                await self._end_drain(self._noticed)  # a restart's, that never came up
            if self.state is not ServerState.NOT_OURS:
                self._emit(ServerState.STOPPED, "not running")
            return f"server {self.recipe.name}: not running"
        wait = self.recipe.drain_s if drain_s is None else drain_s
        grace = self.grace_s if grace_s is None else grace_s
        launched, url = self.launched, self.base_url
        told, words = await tell_runs(self.launcher, launched, url, wait, grace)
        if told:
            self._noticed = launched
        where = "off the router" if self.router is not None else "draining"
        self._emit(ServerState.DRAINING, f"{where}{words}, up to {wait:g} s for its requests")
        try:
            said = await drain_then_stop(
                self.launcher,
                launched,
                self.session,
                url,
                drain_s=wait,
                grace_s=grace,
                router=self.router,
            )
        except Exception:
            # Not stopped (its link did not come back, its host refused): it still serves,
            # so its runs may send to it again; a notice kept would be written again on
            # every reconnect of its link, for a stop nobody carries on.
            await self._end_drain(launched)
            raise
        self.launched = None
        self.state_file.note_stop(self.recipe.name)  # on purpose: not adopted, not restarted
        if for_good:
            await self._end_drain(launched)
        self._emit(ServerState.STOPPED, said)
        return f"server {self.recipe.name}: {said}"

    async def _end_drain(self, launched: Launched | None) -> None:
        """It serves again, or it stopped for good: the drain notice of its port (if any)
        goes, whoever wrote it."""
        if launched is not None:
            await untell_runs(self.launcher, launched)
            self._noticed = None

    async def leave(self) -> None:
        """Stop watching and leave the server running (the panel quits: the next gen-tui
        adopts it from the state file)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def restart(self) -> asyncio.Task[ServerState]:
        """Stop it (if it runs) and start it anew, whatever its state (a person asked)."""
        await self.stop(for_good=False)
        self.ever_healthy = self.adopted = False
        return self.start()

    # the life

    async def run(self) -> ServerState:
        """Keep the server up until it fails, goes down or the task is cancelled; a drain
        notice a restart left goes when it ends so (a run would wait for it in vain)."""
        state = await self._life()
        await self._end_drain(self._noticed)
        return state

    async def _life(self) -> ServerState:
        if (
            self.launched is None
            and (self.recipe.address or not self.launcher.queues)  # a job's node is not known
            and await check_health(self.session, self.health_url) is None
        ):
            self._emit(
                ServerState.NOT_OURS,
                f"{self.url} answers, but gen-tui did not start it: listed, never restarted",
            )
            return self.state
        need_start = self.launched is None
        while True:
            if need_start:
                self._emit(ServerState.STARTING, shlex.join(self.recipe.argv))
                try:
                    self.launched = await self._launch()
                except LaunchError as exc:
                    if not self.ever_healthy:
                        self._emit(ServerState.FAILED, f"never came up: {exc}")
                        return self.state
                    self._emit(ServerState.EXITED, str(exc))
                    if not await self._back_off():
                        return self.state
                    continue
            need_start = True
            self.final = False
            ended = await self._until_healthy()
            if ended is None:
                self.ever_healthy = True
                ended = await self._while_healthy()
            elif not self.ever_healthy and not self.adopted:
                self._emit(ServerState.FAILED, f"never came up: {ended}")
                return self.state
            if self._stopped_elsewhere():
                self._emit(ServerState.STOPPED, f"stopped by another gen-tui ({ended})")
                return self.state
            if self.final:  # a batch job at its time limit ended as its recipe asked
                self.state_file.note_stop(self.recipe.name)
                self._emit(ServerState.STOPPED, ended)
                return self.state
            self._emit(ServerState.EXITED, ended)
            if not await self._back_off():
                return self.state

    async def _launch(self) -> Launched:
        if self.launcher.queues:
            return await self.launcher.start(self.recipe)
        try:
            return await within(self.launcher.start(self.recipe), START_TIMEOUT_S)
        except TimeoutError:
            raise LaunchError(
                f"server {self.recipe.name}: the start did not finish within "
                f"{START_TIMEOUT_S:g} s (a frozen link to {self.recipe.host}?)"
            ) from None

    def _stopped_elsewhere(self) -> bool:
        """Whether another gen-tui (`gen-tui servers stop`, a second panel) stopped it on
        purpose: the state file then holds no launch of it. Not restarted then."""
        entry = self.state_file.read().get(self.recipe.name)
        return entry is not None and entry.launched is None

    async def _until_healthy(self) -> str | None:
        """Wait for the health check: None once it passes, else how the start ended (the
        server exited, or its log stopped growing for `startup_s` without an answer)."""
        launched = self.launched
        assert launched is not None
        where = f" on {launched.node}" if launched.node else ""
        # An adopted server says so: "loading ... answered after 0 s" read as a new start
        # (tried in tmux, issue 32), and the user reopening the panel wants to know it was not.
        is_adopted = launched is self._adopted_launch
        adopted = "adopted (an earlier gen-tui started it) " if is_adopted else ""
        self._emit(
            ServerState.LOADING,
            f"{adopted}{self.launcher.ref_word} {launched.ref}{where}, "
            f"waiting for {self.health_url}",
        )
        began = time.monotonic()
        deadline = began + self.recipe.startup_s
        size = await self.launcher.log_size(launched)
        while True:
            ended = await self.launcher.exit_of(launched)
            if ended is not None:
                self.launched = None
                self.final = ended.final
                return ended.reason
            if await check_health(self.session, self.health_url) is None:
                took = time.monotonic() - began
                said = f"answered after {took:.0f} s"
                if is_adopted:
                    said = f"adopted, answering ({self.restarts} restart(s) this hour)"
                elif self.restarted:
                    said = f"healthy again ({self.restarts} restart(s) this hour); {said}"
                await self._end_drain(launched)
                self._emit(ServerState.HEALTHY, said)
                return None
            now = time.monotonic()
            grown = await self.launcher.log_size(launched)
            if grown is not None and grown != size:
                size, deadline = grown, max(deadline, now + self.recipe.startup_s)
            if now > deadline:
                last = await self.launcher.last_line(launched)
                await self.launcher.stop(launched, self.grace_s)
                self.launched = None
                return (
                    f"no answer on {self.recipe.health} within {self.recipe.startup_s:g} s "
                    f"of its log's last line: {last or '-'}"
                )
            await asyncio.sleep(self.check_s)

    async def _while_healthy(self) -> str:
        """Watch a healthy server until it exits or fails its check for `unhealthy_s`."""
        launched = self.launched
        assert launched is not None
        failing_since: float | None = None
        while True:
            await asyncio.sleep(self.check_s)
            ended = await self.launcher.exit_of(launched)
            if ended is not None:
                self.launched = None
                self.final = ended.final
                return ended.reason
            problem = await check_health(self.session, self.health_url)
            if problem is None:
                if failing_since is not None:
                    failing_since = None
                    self._emit(ServerState.HEALTHY, "answers its health check again")
                continue
            if failing_since is None:
                failing_since = time.time()
                self._emit(ServerState.UNHEALTHY, problem, since=failing_since)
            elif time.time() - failing_since >= self.recipe.unhealthy_s:
                said = await self.launcher.stop(launched, self.grace_s)
                self.launched = None
                return (
                    f"failed its health check for {self.recipe.unhealthy_s:g} s ({problem}); "
                    f"stopped: {said}"
                )

    async def _back_off(self) -> bool:
        """Wait before the next start; False (and down) after K restarts this hour."""
        policy = self.recipe.restart
        recent = self.restarts
        if recent >= policy.max_per_hour:
            self._emit(
                ServerState.DOWN,
                f"{recent} restarts in the last hour (at most {policy.max_per_hour}): "
                "left down until restarted by hand",
            )
            return False
        delay = policy.delay(recent)
        self._emit(
            ServerState.RESTARTING,
            f"in {delay:g} s (restart {recent + 1} of at most {policy.max_per_hour} an hour)",
        )
        await asyncio.sleep(delay)
        self.state_file.note_restart(self.recipe.name, self.kind)
        self.restarted = True
        return True
