"""What the HTTP clients share: one aiohttp session for the run, opened on entry."""

from __future__ import annotations

from typing import Self

import aiohttp

from gen_tui.backends.clients.base import InferenceClient


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
