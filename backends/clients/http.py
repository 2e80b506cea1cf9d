"""What the HTTP clients share: one aiohttp session for the run, opened on entry."""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Self

import aiohttp

from gen_tui.backends.clients.base import InferenceClient
from gen_tui.backends.clients.limits import head
from gen_tui.backends.telemetry.metrics import METRICS_BYTES, MetricsError, MetricsUnreachable

METRICS_TIMEOUT_S = 5.0
"""The longest a /metrics read may take: it is polled every few seconds, and a server too
busy to answer in 5 s has its load shown as unknown rather than a poll piling up."""


JSON_HEADERS = MappingProxyType({"Content-Type": "application/json"})
"""The headers of a request whose body is JSON: one read-only mapping, not a dict a request."""


@functools.lru_cache(maxsize=16)
def request_timeout(total_s: float) -> aiohttp.ClientTimeout:
    """The timeout of one generate request: made once per value, not once per request (every
    request asks, all with the same value)."""
    return aiohttp.ClientTimeout(total=total_s, sock_connect=10)


class HttpClient(InferenceClient):
    """An InferenceClient over aiohttp; `session` exists between enter and exit.

    No connection limit: the engine's slot pool is the one limit on requests in flight.
    """

    def __init__(self, secret: str | None = None) -> None:
        self.secret = secret
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("enter the client (async with) before sending requests")
        return self._session

    async def __aenter__(self) -> Self:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
        self._session = aiohttp.ClientSession(connector=connector)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def metrics(self, url: str) -> str | None:
        """The Prometheus text at `url`/metrics (see :func:`fetch_metrics`)."""
        return await fetch_metrics(self.session, url)


async def fetch_metrics(session: aiohttp.ClientSession, url: str) -> str | None:
    """The Prometheus text at `url`/metrics (SGLang's and vLLM's both serve it at the root),
    bounded; None when there is none (404: SGLang without `--enable-metrics`, or an API such
    as OpenRouter). No API key is sent: the load is not the key's business. MetricsError
    (or MetricsUnreachable) when it cannot be read."""
    try:
        async with session.get(
            f"{url}/metrics", timeout=aiohttp.ClientTimeout(total=METRICS_TIMEOUT_S)
        ) as response:
            if response.status in (404, 405):
                return None
            if response.status != 200:
                raise MetricsError(f"HTTP {response.status}")
            raw = await head(response, METRICS_BYTES)
    except aiohttp.ClientConnectorError as exc:
        raise MetricsUnreachable(f"cannot connect: {exc.os_error}") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise MetricsError(str(exc) or type(exc).__name__) from None
    if raw is None:
        raise MetricsError(f"more than {METRICS_BYTES >> 20} MB of metrics")
    return raw.decode("utf-8", "replace")
