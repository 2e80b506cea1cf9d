"""The one interface the engine has to an inference server: `InferenceClient`.

The engine asks a client what it can do (`can_abort`, `needs_input_ids`), never which
server it is: a new API is a new client, not a new branch in the scheduler. And a test can
hand the engine a scripted client, so scheduling is tested without sockets or a tokenizer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol, Self

from gen_tui.backends.clients.results import Generation


@dataclass(frozen=True, slots=True)
class Request:
    """One attempt at one sample: `input_ids` is None for a client that takes messages."""

    rid: str
    dataset: str
    messages: list[dict[str, str]]
    input_ids: list[int] | None = None
    max_new_tokens: int | None = None
    """This request's cap on its answer (the engine's rule, see answer_cap.py); None: the
    client's sampling settings alone."""


class Progress(Protocol):
    """Where a streaming client says how far an answer has got while it is still coming.

    The engine passes its in-flight entry itself (budget.InFlight has this field), so a
    frame costs one int assignment: precise mode reads the count as the answer's lower
    bound (a censored observation) instead of estimating it from the request's age.
    """

    produced: int
    """Completion tokens received so far for this attempt, at least (never more)."""


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """What a server says about how long a request may be (None: it does not say)."""

    context_length: int | None = None
    """Prompt and answer together, in tokens."""
    max_completion_tokens: int | None = None
    """The longest answer it gives, when less than the context allows (OpenRouter's
    `top_provider.max_completion_tokens`)."""


@dataclass(frozen=True, slots=True)
class Worker:
    """One server behind a router, as the router lists it."""

    url: str
    healthy: bool


class InferenceClient(ABC):
    """Sends requests to servers by URL; one instance serves a whole run.

    Enter it (`async with client:`) around the run: an HTTP client opens its connection
    pool there. `secret` is what must never appear in a reason the engine writes down.
    """

    can_abort: bool = False
    """Whether `abort` stops a request at the server (else the engine never calls it)."""
    needs_input_ids: bool = False
    """Whether requests need token ids (the run then needs a tokenizer) or take messages."""
    secret: str | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    @abstractmethod
    async def generate(
        self, url: str, request: Request, progress: Progress | None = None
    ) -> Generation:
        """The complete answer to `request` from `url`, or RequestFailed.

        A client that streams sets `progress.produced` as frames arrive (when given); one
        that does not leaves it alone.
        """

    @abstractmethod
    async def probe(self, url: str) -> str | None:
        """None if `url` answers, else why not (for the user)."""

    async def capacity(self, url: str) -> int | None:
        """How many requests `url` runs at once, when it says (None: unknown)."""
        return None

    async def model_limits(self, url: str) -> ModelLimits:
        """The context length `url` serves, when it says (asked once, at start)."""
        return ModelLimits()

    async def metrics(self, url: str) -> str | None:
        """The server's Prometheus text (`GET /metrics`); None when it serves none or this
        client cannot ask. Raises MetricsError (telemetry/metrics.py) when the read fails."""
        return None

    async def workers(self, url: str) -> tuple[Worker, ...] | None:
        """The servers behind `url` when it is a router that spreads requests over them
        (None: `url` serves requests itself, or the client cannot tell)."""
        return None

    async def abort(self, url: str, rid: str) -> None:  # noqa: B027 (optional: a no-op)
        """Ask `url` to stop request `rid`; best effort. Only called when `can_abort`."""
