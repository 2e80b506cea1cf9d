"""What the engine accepts from a client: a well-typed answer, or one failed attempt.

Every client's answer passes through `receive` and `check_generation` before it can become
a record, whatever the client, so a client's bug costs a retry, never the data set.
"""

from __future__ import annotations

from collections.abc import Awaitable

from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.untrusted import STORED_CHARS, truncate

_INT = frozenset({int})


def check_generation(generation: Generation) -> Generation:
    """Return `generation` if a record may be made of it, else raise a retryable RequestFailed.

    Why the engine checks what a client returns: a record is forever (training reads its
    ids), while a refused answer costs one retry. A server or proxy that sends ids of the
    wrong type, or a count that disagrees with them, must not end up on disk.
    """
    tokens = generation.completion_tokens
    ids = generation.output_ids
    problem = None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        problem = f"completion_tokens {tokens!r} is not a count"
    elif ids is not None and (not isinstance(ids, list) or len(ids) != tokens):
        problem = f"output_ids do not hold the {tokens} tokens it reports"
    elif ids is not None and not set(map(type, ids)) <= _INT:
        problem = "output_ids holds something other than integer token ids"
    elif (
        not isinstance(generation.finish_reason, str)
        or not isinstance(generation.prompt_tokens, int)
        or not (generation.text is None or isinstance(generation.text, str))
    ):
        problem = "finish_reason, prompt_tokens or text has the wrong type"
    if problem is not None:
        raise RequestFailed(f"malformed response: {problem}", retry=True)
    return generation


async def receive(call: Awaitable[Generation], url: str, secret: str | None = None) -> Generation:
    """Await one client call; anything it raises besides RequestFailed is a malformed answer.

    A client that chokes on an answer shape nobody foresaw would otherwise end the request
    task with a stray exception, and its sample would be dropped for the rest of the run
    without a line in errors.jsonl. Here it is a failed attempt like any other: retried,
    and given up on with its reason. The API key is kept out of the reason, and the reason
    is cut to STORED_CHARS (its head kept, the cut said): a server's error message is
    written to errors.jsonl and the log, and a server may send megabytes of it.
    """
    try:
        generation = await call
    except RequestFailed as exc:
        exc.reason = _stored(exc.reason, secret)
        raise
    except Exception as exc:
        reason = f"malformed response from {url}: {type(exc).__name__}: {exc}"
        raise RequestFailed(_stored(reason, secret), retry=True) from None
    return check_generation(generation)


def _stored(reason: str, secret: str | None) -> str:
    """`reason` as it may be written down: the key redacted first (a cut could otherwise
    leave part of it), then cut to STORED_CHARS."""
    if secret:
        reason = reason.replace(secret, "***")
    return truncate(reason, STORED_CHARS)
