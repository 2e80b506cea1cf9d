"""The servers of one config together: adopt what an earlier gen-tui started, supervise
each recipe, and keep the router's worker list in step (the router is supervised too).

Why a class of its own: the panel and `gen-tui servers up` need the same wiring (adoption
first, so no second copy starts on busy GPUs; the router's argv given its workers' URLs;
one event stream for all), and the supervisor of one server knows nothing of the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace

import aiohttp

from gen_tui.backends.config.server_recipe import ServerRecipe, router_argv
from gen_tui.backends.servers.events import EventSink, ServerState
from gen_tui.backends.servers.history import ServerHistory
from gen_tui.backends.servers.launcher import Launcher
from gen_tui.backends.servers.router import RouterWorkers
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.servers.supervisor import CHECK_S, STOP_GRACE_S, ServerSupervisor


class Fleet:
    """Every server of a config, and its router: started (or adopted) and watched.

    `urls` gives each recipe's URL (the config's :meth:`FileConfig.server_url`);
    `launchers` the launcher of each recipe's kind ("process", "slurm").
    """

    def __init__(
        self,
        servers: Sequence[ServerRecipe],
        urls: Mapping[str, str],
        launchers: Mapping[str, Launcher],
        state: StateFile,
        session: aiohttp.ClientSession,
        sinks: Sequence[EventSink] = (),
        *,
        router: ServerRecipe | None = None,
        check_s: float = CHECK_S,
        grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.servers = list(servers)
        self.urls = dict(urls)
        self.launchers = launchers
        self.state = state
        self.session = session
        self.sinks: list[EventSink] = [*sinks, ServerHistory(state.path.parent)]
        """The caller's sinks, and the servers' history file beside the state file."""
        self.router = router
        self.router_workers: RouterWorkers | None = None
        self.check_s = check_s
        self.grace_s = grace_s
        self.supervisors: dict[str, ServerSupervisor] = {}
        self._router_start: asyncio.Task[None] | None = None

    async def up(self, only: Sequence[str] | None = None) -> dict[str, ServerSupervisor]:
        """Adopt what runs, start the rest (the workers before their router), each in its
        supervisor's task; the supervisors by name."""
        recipes = [r for r in self.servers if only is None or r.name in only]
        adopted = {}
        for kind in {recipe.launcher for recipe in recipes} | (
            {self.router.launcher} if self.router else set()
        ):
            for launched in await self.launchers[kind].adopt():
                adopted[launched.name] = launched
        sinks = list(self.sinks)
        router = self.router if self.router and (only is None or self.router.name in only) else None
        if router is not None:
            workers = {r.name: self.urls[r.name] for r in self.servers}
            self.router_workers = RouterWorkers(
                self.session, self.urls[router.name], workers, router.name
            )
            sinks.append(self.router_workers)
            recipes.append(router)
        for recipe in recipes:
            supervisor = ServerSupervisor(
                recipe,
                self.urls[recipe.name],
                self.launchers[recipe.launcher],
                self.state,
                self.session,
                sinks,
                kind=recipe.launcher,
                adopted=adopted.get(recipe.name),
                check_s=self.check_s,
                grace_s=self.grace_s,
            )
            if recipe is not router and self.router_workers is not None:
                supervisor.router = self.router_workers  # a stop takes it off first
            self.supervisors[recipe.name] = supervisor
            if recipe is not router:
                supervisor.start()
        if router is not None:
            self._router_start = asyncio.create_task(self._start_router(router))
        return self.supervisors

    async def _start_router(self, router: ServerRecipe) -> None:
        """Start the router once its workers have settled (healthy, or failed for good): a
        router started before its workers answer gives up on them (sglang-router 0.3.2
        exits). Its argv names the healthy ones; the others join through its worker API
        when they come up."""
        workers = [self.supervisors[r.name] for r in self.servers if r.name in self.supervisors]
        # Healthy, or left for good: a state in ENDED alone would pass a supervisor that
        # has not begun (its first state is "stopped") and start the router without them.
        while not all(s.state is ServerState.HEALTHY or s.left for s in workers):
            await asyncio.sleep(self.check_s)
        healthy = [s.base_url for s in workers if s.state is ServerState.HEALTHY]
        supervisor = self.supervisors[router.name]
        supervisor.recipe = replace(router, argv=tuple(router_argv(router, healthy)))
        supervisor.start()

    async def wait(self) -> dict[str, ServerState]:
        """Until every supervisor has left its server (failed, down, not ours, stopped)."""
        if self._router_start is not None:
            await self._router_start
        states = await asyncio.gather(*(s.wait() for s in self.supervisors.values()))
        return dict(zip(self.supervisors, states, strict=True))

    async def stop(self, names: Sequence[str] | None = None) -> list[str]:
        """Stop the named servers (all by default), the router first: a line each."""
        if self._router_start is not None and (names is None or self.router_name in names):
            self._router_start.cancel()
        if names is None and self.router_workers is not None:
            await self.router_workers.close()
        chosen = [n for n in self.supervisors if names is None or n in names]
        if self.router is not None and self.router.name in chosen:
            chosen.remove(self.router.name)
            chosen.insert(0, self.router.name)
        return [await self.supervisors[name].stop() for name in chosen]

    @property
    def router_name(self) -> str | None:
        return self.router.name if self.router else None

    async def leave(self) -> None:
        """Stop watching, leave every server running (the panel quits; adopted next time)."""
        if self._router_start is not None:
            self._router_start.cancel()
        for supervisor in self.supervisors.values():
            await supervisor.leave()
        if self.router_workers is not None:
            await self.router_workers.close()
