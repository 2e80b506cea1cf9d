"""`gen-tui servers up|status|stop|restart`: the servers of a config's `[[servers]]` and
`[router]`, started, watched and restarted without the panel (issue 32).

`up` starts what does not run (adopting what an earlier gen-tui started), keeps each up
(backoff, at most K restarts an hour) and says each change in a line; Ctrl-C leaves the
servers running, and the next `up` (or the panel) adopts them. `status` says each
server's state, pid, uptime, restarts and log line; `stop` and `restart` act on the named
ones (all by default for `stop`). The `[alerts]` get "server" events. A bad recipe is one
line naming it and the field; a server that never comes up is one line with its own last
log line, and is not restarted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import aiohttp

from gen_tui.app.cli.exits import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from gen_tui.app.cli.output import error
from gen_tui.backends.alerts import Alerter
from gen_tui.backends.config.file import ConfigError, FileConfig, find_config, load_config
from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.servers.drain import drain_then_stop, tell_runs, untell_runs
from gen_tui.backends.servers.events import ServerEvent, ServerState
from gen_tui.backends.servers.fleet import Fleet
from gen_tui.backends.servers.health import check_health
from gen_tui.backends.servers.history import ServerHistory
from gen_tui.backends.servers.launcher import Launched
from gen_tui.backends.servers.notify import ServerAlerts
from gen_tui.backends.servers.router import RouterWorkers
from gen_tui.backends.servers.setup import ServerSetup
from gen_tui.backends.servers.supervisor import ENDED, STOP_GRACE_S
from gen_tui.backends.untrusted import one_line


class Servers(ServerSetup):
    """A config's servers as this command sees them: the wiring the panel uses too
    (:class:`ServerSetup`), with the command's HTTP session."""

    def __init__(self, config: FileConfig, session: aiohttp.ClientSession) -> None:
        super().__init__(config)
        self.session = session

    async def adopted(self) -> dict[str, Launched]:
        found: dict[str, Launched] = {}
        for launcher in self.launchers.values():
            for launched in await launcher.adopt():
                found[launched.name] = launched
        return found

    def url_of(self, recipe: ServerRecipe, launched: Launched | None) -> str:
        """Where `recipe`'s server answers: a batch job without an `address` on its node."""
        url = self.urls[recipe.name]
        if launched and launched.node and self.launchers[recipe.launcher].queues:
            url = url if recipe.address else f"http://{launched.node}:{recipe.port}"
        return url

    def router_workers(
        self, adopted: dict[str, Launched], stopping: Sequence[str]
    ) -> RouterWorkers | None:
        """The running router's worker list, for a stop to take its server off first; None
        when there is no router, it does not run, or it is being stopped too (first)."""
        router = self.config.router
        if router is None or router.name not in adopted or router.name in stopping:
            return None
        workers = {
            recipe.name: self.url_of(recipe, adopted.get(recipe.name))
            for recipe in self.config.servers
        }
        listing = RouterWorkers(self.session, self.urls[router.name], workers, router.name)
        listing.router_up = True
        return listing

    def fleet(self, sinks: Sequence[Callable[[ServerEvent], None]]) -> Fleet:
        return Fleet(
            self.config.servers,
            self.urls,
            self.launchers,
            self.state,
            self.session,
            sinks,
            router=self.config.router,
        )


def _alert_failed(line: str) -> None:
    error(line)


def say_event(event: ServerEvent) -> None:
    """A server's event as a line on stdout, with the time."""
    stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
    print(f"{stamp} {one_line(event.line(), 600)}", flush=True)


def _uptime(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


async def _until_signal(task: asyncio.Future[Any]) -> bool:
    """Wait for `task` or SIGINT/SIGTERM; True when a signal came first."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    return stop.is_set()


async def up(servers: Servers, names: list[str]) -> int:
    alerter = Alerter(servers.config.alerts, on_failure=_alert_failed, in_a_run=False)
    fleet = servers.fleet([say_event, ServerAlerts(alerter)])
    await fleet.up(names or None)
    waiting = asyncio.ensure_future(fleet.wait())
    if await _until_signal(waiting):
        await fleet.leave()
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        print("left the servers running; `gen-tui servers up` (or the panel) adopts them")
        await asyncio.to_thread(alerter.close)
        return EXIT_OK
    states = waiting.result()
    await asyncio.to_thread(alerter.close)
    bad = [
        name for name, state in states.items() if state in (ServerState.FAILED, ServerState.DOWN)
    ]
    return EXIT_ERROR if bad else EXIT_OK


async def status(servers: Servers, names: list[str]) -> int:
    adopted = await servers.adopted()
    entries = servers.state.read()
    for recipe in _chosen(servers.recipes, names):
        launched = adopted.get(recipe.name)
        url = servers.url_of(recipe, launched)
        problem = await check_health(servers.session, url + recipe.health, 3.0)
        entry = entries.get(recipe.name)
        restarts = entry.recent() if entry else 0
        if launched is not None:
            word = "healthy" if problem is None else "running, not healthy"
            launcher = servers.launchers[recipe.launcher]
            node = f" on {launched.node}" if launched.node else ""
            where = (
                f"{launcher.ref_word} {launched.ref}{node}, "
                f"up {_uptime(time.time() - launched.started_at)}"
            )
            last = await launcher.last_line(launched)
        elif problem is None:
            word, where, last = "not ours", "answers, not started by gen-tui", ""
        else:
            word, where, last = "not running", "-", ""
        line = f"{recipe.name}: {word} ({where}), {restarts} restart(s) this hour, {url}"
        print(one_line(line + (f" | {last}" if last else ""), 600))
    return EXIT_OK


async def stop(servers: Servers, names: list[str]) -> int:
    adopted = await servers.adopted()
    chosen = _chosen(servers.recipes, names)
    if servers.config.router in chosen:  # the router first: no request goes to a stopped one
        chosen.remove(servers.config.router)
        chosen.insert(0, servers.config.router)
    router = servers.router_workers(adopted, stopping=[r.name for r in chosen])
    history = ServerHistory(servers.folder)
    for recipe in chosen:
        launched = adopted.get(recipe.name)
        if launched is None:
            print(f"{recipe.name}: not running (or not started by gen-tui): left alone")
            continue
        launcher, url = servers.launchers[recipe.launcher], servers.url_of(recipe, launched)
        # Its runs told first (they send it nothing new), untold once it is stopped for
        # good: a notice kept would keep a server started there later out of them.
        await tell_runs(launcher, launched, url, recipe.drain_s, STOP_GRACE_S)
        said = await drain_then_stop(
            launcher,
            launched,
            servers.session,
            url,
            drain_s=recipe.drain_s,
            grace_s=STOP_GRACE_S,
            router=router,
        )
        servers.state.note_stop(recipe.name)
        await untell_runs(launcher, launched)
        history(ServerEvent(recipe.name, ServerState.STOPPED, time.time(), said, launched.ref))
        print(one_line(f"{recipe.name}: {said}", 600))
    return EXIT_OK


async def restart(servers: Servers, names: list[str]) -> int:
    await stop(servers, names)
    alerter = Alerter(servers.config.alerts, on_failure=_alert_failed, in_a_run=False)
    settled: dict[str, ServerState] = {}

    def track(event: ServerEvent) -> None:
        say_event(event)
        if event.state is ServerState.HEALTHY or event.state in ENDED:
            settled[event.name] = event.state

    fleet = servers.fleet([track, ServerAlerts(alerter)])
    chosen = [recipe.name for recipe in _chosen(servers.recipes, names)]
    await fleet.up(chosen)
    while not all(name in settled for name in chosen):
        await asyncio.sleep(0.2)
    await fleet.leave()
    await asyncio.to_thread(alerter.close)
    return EXIT_OK if all(settled[n] is ServerState.HEALTHY for n in chosen) else EXIT_ERROR


def _chosen(recipes: list[ServerRecipe], names: Sequence[str]) -> list[ServerRecipe]:
    return [recipe for recipe in recipes if not names or recipe.name in names]


COMMANDS: dict[str, Callable[[Servers, list[str]], Coroutine[Any, Any, int]]] = {
    "up": up,
    "status": status,
    "stop": stop,
    "restart": restart,
}


async def _main(config: FileConfig, action: str, names: list[str]) -> int:
    async with aiohttp.ClientSession() as session:
        servers = Servers(config, session)
        problem = servers.unsupported()
        if problem is not None:
            await servers.close()
            error(problem)
            return EXIT_USAGE
        try:
            return await COMMANDS[action](servers, names)
        finally:
            await servers.close()


def servers_main(args: argparse.Namespace) -> int:
    path = args.servers_config or find_config()
    if path is None:
        error("no config: give --config FILE with [[servers]] tables")
        return EXIT_USAGE
    try:
        config = load_config(path)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_USAGE
    known = [r.name for r in [*config.servers, *([config.router] if config.router else [])]]
    if not known:
        error(f"{path} has no [[servers]] (see docs/servers.md)")
        return EXIT_USAGE
    unknown = [name for name in args.names if name not in known]
    if unknown:
        error(f"{path}: no server {unknown[0]!r} (known: {', '.join(known)})")
        return EXIT_USAGE
    try:
        return asyncio.run(_main(config, args.servers_action, list(args.names)))
    except KeyboardInterrupt:
        print("interrupted; the servers run on", file=sys.stderr)
        return EXIT_OK
