"""A client that answers from a script: the engine's scheduling, tested without sockets.

In the spirit of httpx's MockTransport: `script(url, request)` returns a Generation (or an
awaitable of one), or raises RequestFailed, and the client keeps what it was asked, so a
test can say what the engine sent, where, and what it aborted.

With `stream=True` it plays a streaming server: the script is then called with the
request's `Progress` as well (a holder of its own when the engine gave none), and sets
`progress.produced` as its frames "arrive" (see `stream`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from gen_tui.backends.clients.base import InferenceClient, Progress, Request
from gen_tui.backends.clients.results import Generation

Script = Callable[[str, Request], Generation | Awaitable[Generation]]
StreamScript = Callable[[str, Request, Progress], Awaitable[Generation]]


@dataclass(slots=True)
class Produced:
    """A `Progress` of the client's own, for a streamed request the engine gave none."""

    produced: int = 0


def answer(tokens: int, *, prompt_tokens: int = 1, latency_s: float = 0.0) -> Generation:
    """A complete answer of `tokens` tokens (ids 0..tokens-1), as a server would send it."""
    return Generation(
        output_ids=list(range(tokens)),
        text=None,
        prompt_tokens=prompt_tokens,
        completion_tokens=tokens,
        finish_reason="length",
        latency_s=latency_s,
    )


async def stream(
    progress: Progress, tokens: int, frames: list[int], between: Callable[[], Awaitable[object]]
) -> Generation:
    """An answer of `tokens` tokens streamed as `frames` (cumulative counts): each count
    goes to `progress`, then `between()` is awaited (a test's pause or gate)."""
    for count in frames:
        progress.produced = count
        await between()
    progress.produced = tokens
    return answer(tokens)


class ScriptedClient(InferenceClient):
    """Answers every request from `script`; `down` maps a URL to its probe failure.

    The abilities are per instance, so one test can play either kind of server.
    """

    def __init__(
        self,
        script: Script | StreamScript,
        *,
        can_abort: bool = False,
        needs_input_ids: bool = False,
        down: dict[str, str] | None = None,
        capacity: int | None = None,
        stream: bool = False,
    ) -> None:
        self.script = script
        self.stream = stream
        self.can_abort = can_abort
        self.needs_input_ids = needs_input_ids
        self.down = dict(down or {})
        self.running = capacity
        self.sent: list[tuple[str, Request]] = []
        self.aborted: list[tuple[str, str]] = []

    async def generate(
        self, url: str, request: Request, progress: Progress | None = None
    ) -> Generation:
        self.sent.append((url, request))
        if self.stream:
            holder = progress if progress is not None else Produced()
            # stream=True: the script is a StreamScript, which takes the progress too
            return await cast(StreamScript, self.script)(url, request, holder)
        result = cast(Script, self.script)(url, request)
        if inspect.isawaitable(result):
            answered: Generation = await result
            return answered
        return result

    async def probe(self, url: str) -> str | None:
        return self.down.get(url)

    async def capacity(self, url: str) -> int | None:
        return self.running

    async def abort(self, url: str, rid: str) -> None:
        self.aborted.append((url, rid))
