"""A router's worker list kept in step with the servers: a worker that is down leaves it,
one healthy again comes back, through the router's worker API (sglang-router 0.3.2:
`GET /workers`, `POST /workers {"url"}`, `DELETE /workers/ID`; see REFERENCE.md).

Why remove a dead worker rather than let the router find out: the router probes its
workers every minute or so and keeps sending to a dead one until then; a removal is at
once. Each change runs in the order the events came, one at a time, and never raises: a
router that does not answer is said in the returned line and the next event tries again.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import aiohttp

from gen_tui.backends.aio import within
from gen_tui.backends.clients.models import get_json
from gen_tui.backends.clients.router import WORKERS_BYTES, worker_url
from gen_tui.backends.servers.events import ServerEvent, ServerState

ADD_ON = frozenset({ServerState.HEALTHY})
REMOVE_ON = frozenset(
    {
        ServerState.EXITED,
        ServerState.DOWN,
        ServerState.UNHEALTHY,
        ServerState.STOPPED,
        ServerState.DRAINING,
    }
)
TIMEOUT_S = 10.0
RECONCILE_S = 5.0
"""How often the router's list is checked against the servers' states: a change the
router refused or lost (one made while it was still starting) is made again."""


def listed(listing: Any) -> dict[str, str]:
    """URL -> worker id of a `GET /workers` answer (entries without both are skipped)."""
    entries = listing.get("workers") if isinstance(listing, dict) else None
    out: dict[str, str] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        url, ident = worker_url(entry.get("url")), entry.get("id")
        if url is not None and isinstance(ident, str) and ident:
            out[url] = ident
    return out


class RouterWorkers:
    """The worker list of the router at `router_url`, changed as the servers' events say.

    `workers` maps a server's name to its URL; `on_line` hears what was done (or why not).
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        router_url: str,
        workers: dict[str, str],
        router_name: str = "router",
        reconcile_s: float = RECONCILE_S,
    ) -> None:
        self.session = session
        self.router_url = router_url.rstrip("/")
        self.workers = workers
        self.router_name = router_name
        self.reconcile_s = reconcile_s
        self.lines: list[str] = []
        self.states: dict[str, ServerState] = {}
        """Each worker's last state, as its events said."""
        self.router_up = False
        self.moved: dict[str, str] = {}
        """Worker name -> the URL it answered on before it came back elsewhere (a Slurm
        job resubmitted onto another node): taken off the router's list when it is added
        at its new URL."""
        self._queue: asyncio.Queue[ServerEvent] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def __call__(self, event: ServerEvent) -> None:
        """An event sink: queue the change for the router (returns at once)."""
        if event.name == self.router_name:
            self.router_up = event.state is ServerState.HEALTHY
        elif event.name in self.workers:
            self.states[event.name] = event.state
            old = self.workers[event.name]
            if event.url and event.url != old:
                self.moved.setdefault(event.name, old)
                self.workers[event.name] = event.url
        else:
            return
        self._queue.put_nowait(event)
        if self._task is None:
            self._task = asyncio.create_task(self._apply_all())

    async def _apply_all(self) -> None:
        while True:
            try:
                event = await within(self._queue.get(), self.reconcile_s)
            except TimeoutError:
                event = None
            if event is not None and event.name in self.workers:
                if event.state in ADD_ON | REMOVE_ON:
                    self.lines.append(await self.apply(event.name, event.state))
            elif self.router_up:  # the router came up, or a while passed: check the list
                self.lines.extend(await self.reconcile())

    async def reconcile(self) -> list[str]:
        """Make the router's list what the workers' states say (healthy in, others out)."""
        try:
            present = await self.listing()
        except (aiohttp.ClientError, TimeoutError, OSError, RuntimeError):
            return []
        said = []
        for name, state in self.states.items():
            url = self.workers[name]
            if name in self.moved or (
                (state in ADD_ON) != (url in present) and state in ADD_ON | REMOVE_ON
            ):
                said.append(await self.apply(name, state))
        return said

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def listing(self) -> dict[str, str]:
        return listed(await get_json(self.session, f"{self.router_url}/workers", WORKERS_BYTES))

    async def add(self, url: str) -> int:
        """POST /workers {"url"}: the router's answer's status."""
        async with self.session.post(
            f"{self.router_url}/workers",
            json={"url": url},
            timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
        ) as answer:
            return answer.status

    async def remove(self, ident: str) -> int:
        """DELETE /workers/ID: the router's answer's status."""
        async with self.session.delete(
            f"{self.router_url}/workers/{quote(ident, safe='')}",
            timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
        ) as answer:
            return answer.status

    async def apply(self, name: str, state: ServerState) -> str:
        """Add or remove the server `name` as `state` says: one line of what happened."""
        url = self.workers[name]
        try:
            present = await self.listing()
            said = ""
            old = self.moved.get(name)
            if old is not None and old != url:  # it came back elsewhere: its old URL goes
                if old in present:
                    said = f"router: removed {old} (moved) ({await self.remove(present[old])}); "
                del self.moved[name]
            if state in ADD_ON:
                if url in present:
                    return f"{said}router: {url} already listed"
                return f"{said}router: added {url} ({await self.add(url)})"
            if url not in present:
                return f"{said}router: {url} not listed"
            return f"{said}router: removed {url} ({await self.remove(present[url])})"
        except (aiohttp.ClientError, TimeoutError, OSError, RuntimeError) as exc:
            # RuntimeError: the session closed under it (gen-tui is leaving)
            return f"router: {self.router_url} could not be changed ({type(exc).__name__})"
