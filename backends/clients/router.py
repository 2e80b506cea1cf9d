"""SGLang's router (`sglang-router`, a Rust gateway) seen from a client: is a URL one, and
which workers does it spread requests over.

A router proxies `/generate` and `/health`, so a run works through it as through one
server. Two things do not pass through, and a client has to go to the workers for them
(seen on sglang-router 0.3.2):

- `POST /abort_request` answers 404: the router does not forward it (sglang#6531). An
  abort must go to every worker, since the client cannot know which one runs a request
  (SGLang answers 200 for a rid it does not hold, so the others lose nothing).
- `GET /get_server_info` answers the router's own `{"router_manager": true,
  "routers_count": 1, "workers_count": N}` instead of a worker's settings, so a worker's
  `max_running_requests` has to be asked of each worker.

`GET /workers` lists them: `{"workers": [{"url", "is_healthy", "load", "worker_type",
...}], "total": N}`. What a router sends is untrusted: read bounded, and only a plain
http(s) URL counts as a worker.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from gen_tui.backends.clients.base import Worker
from gen_tui.backends.clients.models import SERVER_INFO_BYTES, get_json
from gen_tui.backends.watcher import worker_url

__all__ = [
    "MAX_WORKERS",
    "REFRESH_S",
    "WORKERS_BYTES",
    "Routers",
    "is_router",
    "router_workers",
    "worker_url",
    "workers_from",
]

WORKERS_BYTES = 4 << 20
"""The most of /workers read (about 400 bytes a worker: thousands of workers)."""
MAX_WORKERS = 1024
"""The most workers taken from one router; more is not a listing gen-tui believes."""


def is_router(info: Any) -> bool:
    """Whether a /get_server_info answer is a router's own (`router_manager: true`)."""
    return isinstance(info, dict) and info.get("router_manager") is True


def workers_from(listing: Any) -> tuple[Worker, ...]:
    """The workers in a /workers answer, each URL once; entries that are not one are skipped
    (an empty answer means the router has none, or says nothing a client can use)."""
    entries = listing.get("workers") if isinstance(listing, dict) else None
    if not isinstance(entries, list):
        return ()
    found: dict[str, Worker] = {}
    for entry in entries[:MAX_WORKERS]:
        url = worker_url(entry.get("url")) if isinstance(entry, dict) else None
        if url is not None and url not in found:
            found[url] = Worker(url, healthy=entry.get("is_healthy") is not False)
    return tuple(found.values())


async def router_workers(session: aiohttp.ClientSession, url: str) -> tuple[Worker, ...] | None:
    """The workers behind `url` if it is an SGLang router, else None (best effort: a server
    that does not answer is taken for what it says it is, a server)."""
    info = await get_json(session, f"{url}/get_server_info", SERVER_INFO_BYTES)
    if not is_router(info):
        return None
    return workers_from(await get_json(session, f"{url}/workers", WORKERS_BYTES))


REFRESH_S = 5.0
"""How old a router's worker list may be when it is needed again (a router can gain or
lose workers during a run, and an abort must reach the ones it has now)."""


class Routers:
    """What each URL is (a server, or a router and its workers), asked once per `refresh_s`
    however many requests want to know at once (an abort asks for every rid in flight)."""

    def __init__(self, refresh_s: float = REFRESH_S) -> None:
        self.refresh_s = refresh_s
        self._asked: dict[str, tuple[float, asyncio.Future[tuple[Worker, ...] | None]]] = {}

    async def workers(self, session: aiohttp.ClientSession, url: str) -> tuple[Worker, ...] | None:
        now = time.monotonic()
        asked = self._asked.get(url)
        if asked is None or now - asked[0] > self.refresh_s:
            asked = (now, asyncio.ensure_future(router_workers(session, url)))
            self._asked[url] = asked
        # Shielded: one waiter cancelled (a request task at an abort) leaves the others theirs.
        return await asyncio.shield(asked[1])
