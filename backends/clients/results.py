"""What every server client returns: a complete generation, or a failure that says what to do.

The engine treats SGLang's native API and OpenAI-compatible APIs alike through these types;
how a client reads them off the wire is `wire.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Generation:
    """A complete response; `output_ids` is None when neither server nor tokenizer gave ids.

    `reasoning` is a thinking model's trace as an OpenAI-compatible server sends it apart
    from the answer (None when it sent none). `ids_gap` is `len(output_ids) -
    completion_tokens` when gen-tui built the ids itself from text (None when the server
    gave them): set where they are built, as only there is it known which they are.
    """

    output_ids: list[int] | None
    text: str | None
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    latency_s: float
    cost: float | None = None
    reasoning: str | None = None
    ids_gap: int | None = None


class RequestFailed(Exception):
    """A request that produced no usable response.

    `retry`: worth sending again. `counts`: counts against the sample's attempt limit
    (a refused connection does not: the server is away, not the sample at fault).
    `kind` asks the engine for more than a retry: "rate" (slow down the whole pool),
    "payment" (out of credits: pause dispatch) or "auth" (a bad key: stop the run).
    """

    RATE = "rate"
    PAYMENT = "payment"
    AUTH = "auth"

    def __init__(
        self,
        reason: str,
        *,
        retry: bool,
        counts: bool = True,
        status: int | None = None,
        retry_after: float | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry
        self.counts = counts
        self.status = status
        self.retry_after = retry_after
        self.kind = kind


class Aborted(RequestFailed):
    """The server answered with `finish_reason.type == "abort"`: a partial, never data."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, retry=True)
