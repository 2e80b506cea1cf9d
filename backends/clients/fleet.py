"""One client over a mixed fleet: each lane's URL answered by the client of its own API.

The engine talks to one `InferenceClient` whose every call names a URL; this one hands the
call to the lane's client (SGLang native for the box, OpenAI-compatible for an API), so the
runner, telemetry and aborts need not know the fleet is mixed.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from gen_tui.backends.clients.base import InferenceClient, ModelLimits, Progress, Request, Worker
from gen_tui.backends.clients.results import Generation


class FleetClient(InferenceClient):
    """Routes by URL to the client of each lane (`clients`: URL to client; one client may
    serve several URLs)."""

    def __init__(self, clients: dict[str, InferenceClient]) -> None:
        if not clients:
            raise ValueError("a fleet needs at least one lane")
        self.clients = {url.rstrip("/"): client for url, client in clients.items()}
        distinct = list({id(client): client for client in self.clients.values()}.values())
        self._distinct = distinct
        self.can_abort = any(client.can_abort for client in distinct)
        self.needs_input_ids = any(client.needs_input_ids for client in distinct)
        self.secret = next((c.secret for c in distinct if c.secret is not None), None)
        self._stack: AsyncExitStack | None = None

    def api(self, url: str) -> InferenceClient:
        return self.clients[url.rstrip("/")]

    async def __aenter__(self) -> FleetClient:
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            for client in self._distinct:
                await stack.enter_async_context(client)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()

    async def generate(
        self, url: str, request: Request, progress: Progress | None = None
    ) -> Generation:
        client = self.api(url)
        if not client.needs_input_ids and request.input_ids is not None:
            # A lane that takes messages gets messages (the ids are the box's, made for
            # every request since some lane needs them).
            request = Request(
                request.rid, request.dataset, request.messages, None, request.max_new_tokens
            )
        return await client.generate(url, request, progress)

    async def probe(self, url: str) -> str | None:
        return await self.api(url).probe(url)

    async def capacity(self, url: str) -> int | None:
        return await self.api(url).capacity(url)

    async def model_limits(self, url: str) -> ModelLimits:
        return await self.api(url).model_limits(url)

    async def metrics(self, url: str) -> str | None:
        return await self.api(url).metrics(url)

    async def workers(self, url: str) -> tuple[Worker, ...] | None:
        return await self.api(url).workers(url)

    async def abort(self, url: str, rid: str) -> None:
        client = self.api(url)
        if client.can_abort:
            await client.abort(url, rid)
