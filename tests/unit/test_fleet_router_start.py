"""The fleet starts its router once the workers have settled, and names them in its argv
(sglang-router 0.3.2 given workers that do not answer yet gives up on them).

Found by issue 32's real story: the supervisors' first state is "stopped" (not yet begun),
one of the states a server is left in, so the fleet read workers that had not started as
settled and started the router at once with an empty `--worker-urls`: every worker then
joined only later through the worker API, and a router recipe that needs its workers at
start (or a router that exits without any) did not get them."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.servers.events import ServerEvent, ServerState
from gen_tui.backends.servers.fleet import Fleet
from gen_tui.backends.servers.launcher import Launched
from gen_tui.backends.servers.state import StateFile
from tests.support.polling import wait_until
from tests.support.servers import IdleLauncher

LOAD_S = 0.5
"""How long a fake worker takes to answer its health check once started."""


class FakeLauncher(IdleLauncher):
    """Starts nothing: notes each start (with its argv) and when it happened; the fake
    servers answer /health LOAD_S after theirs (the router at once)."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[float, tuple[str, ...]]] = {}

    async def start(self, recipe: ServerRecipe) -> Launched:
        self.started[recipe.name] = (time.monotonic(), recipe.argv)
        return Launched(recipe.name, str(1000 + len(self.started)), "local", recipe.port,
                        time.time(), "log")  # fmt: skip

    def answers(self, name: str) -> bool:
        began = self.started.get(name)
        delay = 0.0 if name == "router" else LOAD_S
        return began is not None and time.monotonic() - began[0] >= delay


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeLauncher, dict[str, str]]]:
    """A fake launcher, and one loopback HTTP server per name whose /health answers 200
    once the launcher has "started" it and it has loaded."""
    launcher = FakeLauncher()
    runners, urls = [], {}
    for name in ("w0", "w1", "router"):

        async def health(_: web.Request, name: str = name) -> web.Response:
            return web.Response(status=200 if launcher.answers(name) else 503)

        app = web.Application()
        app.router.add_get("/health", health)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        urls[name] = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield launcher, urls
    for runner in runners:
        await runner.cleanup()


async def test_the_router_starts_after_its_workers_answer_and_names_them(
    servers: tuple[FakeLauncher, dict[str, str]], tmp_path: Path
) -> None:
    launcher, urls = servers
    workers = [ServerRecipe(name, ("serve", name), 1) for name in ("w0", "w1")]
    router = ServerRecipe("router", ("route", "--worker-urls", "{workers}"), 2)
    events: list[ServerEvent] = []
    async with aiohttp.ClientSession() as session:
        fleet = Fleet(workers, urls, {"process": launcher}, StateFile(tmp_path), session,
                      [events.append], router=router, check_s=0.05)  # fmt: skip
        await fleet.up()
        try:
            await wait_until(lambda: "router" in launcher.started, 10, "the router started")
            when, argv = launcher.started["router"]
            assert argv == ("route", "--worker-urls", urls["w0"], urls["w1"])
            for name in ("w0", "w1"):
                assert when - launcher.started[name][0] >= LOAD_S, f"started before {name} answered"
            healthy = [e.name for e in events if e.state is ServerState.HEALTHY]
            assert healthy[:2] == ["w0", "w1"] or healthy[:2] == ["w1", "w0"], healthy
        finally:
            await fleet.leave()
