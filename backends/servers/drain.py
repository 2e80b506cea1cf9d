"""Draining a server before it is stopped on purpose: off the router first, then a bounded
wait for its in-flight requests, then the launcher's SIGTERM (SIGKILL after the grace).

Why: a stop from the panel or `gen-tui servers stop` (or a restart with edited flags) is
not a crash, and must not turn the requests it is serving into errors and retries. The
router is told first (its worker removed at once, so nothing new is sent there), then the
server's own `/metrics` says how many requests are still running or queued; the stop waits
until none is, or `drain_s` has passed (a long generation must not hold a stop for ever).
A server without `/metrics` (or one that does not answer it) has no load to wait for: its
SIGTERM's grace is its drain then, and the line says so.

A stop over SSH whose link drops or freezes under it (the keepalive gives a frozen link up
after about 8 s) is tried again once the link is back, for RELINK_S at most: before, the
stop failed, the server kept running and its drain notice was written again on every
reconnect, so the runs kept off a server nobody was stopping any more. Trying again is
safe: each try checks the server's identity (its pid and start time, or its job) before
a signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp

from gen_tui.backends.aio import within
from gen_tui.backends.clients.http import fetch_metrics
from gen_tui.backends.hosts.connection import Disconnected
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.launcher import Launched, Launcher
from gen_tui.backends.servers.router import RouterWorkers
from gen_tui.backends.telemetry.metrics import MetricsError, parse_metrics
from gen_tui.backends.untrusted import one_line

POLL_S = 0.5
"""How often the load of a draining server is read."""
RELINK_S = 60.0
"""How long a stop cut off by its link's drop is tried again (each try waits for the link
to come back: a first reconnect takes 1 to 2 s, a frozen link's keepalive about 8 s)."""
RETRY_PAUSE_S = 0.5
"""The pause between two tries of a stop cut off by its link."""
NOTICE_S = 10.0
"""How long writing or removing a drain notice may take (over SSH: a frozen link must not
hold a stop)."""


async def tell_runs(
    launcher: Launcher, launched: Launched, url: str, wait_s: float, grace_s: float
) -> tuple[bool, str]:
    """Publish the drain notice the runs on `launched`'s machine read
    (backends/drain_notice.py): they send it nothing new. Whether it was written, and what
    a stop's DRAINING line adds ("" when its runs cannot be told)."""
    try:
        told = await within(launcher.tell_drain(launched, url, wait_s, grace_s), NOTICE_S)
    except TimeoutError:
        return False, f", its runs not told (no answer from its host in {NOTICE_S:g} s)"
    except (OSError, SSHError) as exc:
        return False, f", its runs not told ({one_line(str(exc), 200)})"
    return told, ", its runs told" if told else ""


async def untell_runs(launcher: Launcher, launched: Launched) -> None:
    """The drain notice of `launched`'s port (if any) goes: it serves again, or it was
    stopped for good (a notice kept would keep a server started there later out of the
    runs). A failed removal is left to the runs' own checks (drain_notice.py)."""
    with contextlib.suppress(OSError, SSHError, TimeoutError):
        await within(launcher.end_drain(launched), NOTICE_S)


async def in_flight(session: aiohttp.ClientSession, url: str) -> int | None:
    """Requests running or queued on the server at `url`, by its /metrics; None: unknown."""
    try:
        text = await fetch_metrics(session, url)
    except MetricsError:
        return None
    if text is None:
        return None
    try:
        load = parse_metrics(text)
    except MetricsError:
        return None
    if load.running is None and load.queued is None:
        return None
    return int((load.running or 0) + (load.queued or 0))


async def drain(
    session: aiohttp.ClientSession, url: str, wait_s: float, poll_s: float = POLL_S
) -> str:
    """Wait until the server at `url` has no request in flight, `wait_s` at most: one line."""
    began = time.monotonic()
    while True:
        load = await in_flight(session, url)
        took = time.monotonic() - began
        if load is None:
            return "its load is not known (no /metrics): not waited for"
        if load == 0:
            return f"drained in {took:.1f} s"
        if took >= wait_s:
            return f"{load} request(s) still in flight after {wait_s:g} s: stopped anyway"
        await asyncio.sleep(min(poll_s, max(wait_s - took, 0.0)))


async def drain_then_stop(
    launcher: Launcher,
    launched: Launched,
    session: aiohttp.ClientSession,
    url: str,
    *,
    drain_s: float,
    grace_s: float,
    router: RouterWorkers | None = None,
) -> str:
    """Take `launched` off `router` (when that is up and it is one of its workers), drain
    it for `drain_s` at most, then stop it (SIGTERM, SIGKILL after `grace_s`): one line of
    the three steps."""
    if launcher.queues and launched.node is None:  # still queued: nothing it could serve
        return await launcher.stop(launched, grace_s)
    said = []
    if router is not None and router.router_up and launched.name in router.workers:
        said.append(await router.apply(launched.name, ServerState.DRAINING))
    said.append(await drain(session, url, drain_s))
    said.append(await stop_through_drops(launcher, launched, grace_s))
    return "; ".join(said)


async def stop_through_drops(launcher: Launcher, launched: Launched, grace_s: float) -> str:
    """`launcher.stop`, tried again while its SSH link drops under it (for RELINK_S at
    most; see the module's docstring): its line, saying so when it was."""
    began = time.monotonic()
    cuts = 0
    while True:
        try:
            said = await launcher.stop(launched, grace_s)
        except Disconnected as exc:
            cuts += 1
            if time.monotonic() - began + RETRY_PAUSE_S >= RELINK_S:
                raise SSHError(
                    f"the stop was cut off by its link {cuts} time(s) in {RELINK_S:g} s "
                    f"({one_line(str(exc), 200)})"
                ) from None
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        if cuts:
            said += f" (after its link dropped {cuts} time(s) during the stop)"
        return said
